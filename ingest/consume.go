package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Run consumes until ctx is done. The batch in hand when ctx ends is finished
// (written and acknowledged) before Run returns.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.setup(ctx)
	if err != nil {
		return err
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(2 * w.cfg.BatchSize))
	if err != nil {
		return fmt.Errorf("ingest: pull from %s: %w", w.cfg.Consumer, err)
	}
	defer iter.Stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the watchers end with Run

	go w.watchLag(ctx, cons)
	go w.watchStreams(ctx)
	go w.sweep(ctx)

	w.log.Info("ingest consuming", "stream", w.cfg.Stream, "consumer", w.cfg.Consumer,
		"batch_size", w.cfg.BatchSize, "appliers", w.cfg.Appliers, "linger", w.cfg.Linger.String())
	// One collector routes each message to an applier by the entity it
	// names (shardOf), and each applier forms and writes its own batches, so
	// a batch is collected while others wait on Postgres or Redis. Prices
	// and trades of one market always go to the same applier: two appliers
	// of a process never write the same price document at once, so they
	// never wait for each other's document locks, however hot a market is.
	// (Event and market messages, which renumber several documents, may
	// still meet another applier's locks; so may other processes. The
	// store's locks and revisions keep that correct.)
	// While an applier is busy, its messages gather and its next batch is
	// larger.
	shards := make([]chan jetstream.Msg, w.cfg.Appliers)
	var wg sync.WaitGroup
	for i := range shards {
		shards[i] = make(chan jetstream.Msg, w.cfg.BatchSize)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.applier(ctx, shards[i])
		}()
	}
	err = w.collect(ctx, iter, shards)
	for _, c := range shards {
		close(c)
	}
	wg.Wait()
	return err
}

// shardOf names the applier of a message: the id in its subject (a
// market's for prices and trades, an event's for events), except that a
// market message goes by the event its body names, with that event's other
// markets and the event itself: a market update renumbers its event's
// document, so a load of many markets of one event would otherwise make every
// applier wait for the others' event locks. Such a message may then meet the
// market's price batches in another applier; market changes are rare, and
// the store's locks keep that correct.
func (w *Worker) shardOf(m jetstream.Msg, n int) int {
	if n == 1 {
		return 0
	}
	subject := m.Subject()
	key := subject
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		key = subject[i+1:]
		if strings.HasSuffix(subject[:i], "."+KindMarket) {
			var body struct {
				EventID string `json:"event_id"`
			}
			if json.Unmarshal(m.Data(), &body) == nil && body.EventID != "" {
				key = body.EventID
			}
		}
	}
	h := fnv.New32a()
	h.Write([]byte(key)) //nolint:errcheck // a hash.Hash never fails to write
	return int(h.Sum32() % uint32(n))
}

// collect routes messages to the appliers' queues until ctx is done.
func (w *Worker) collect(ctx context.Context, iter jetstream.MessagesContext, shards []chan jetstream.Msg) error {
	for {
		m, err := iter.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				w.handBack(iter)
				return nil
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return fmt.Errorf("ingest: message iterator closed: %w", err)
			}
			w.log.Warn("ingest pull", "err", err)
			continue
		}
		select {
		case shards[w.shardOf(m, len(shards))] <- m:
		case <-ctx.Done():
			m.Nak() //nolint:errcheck // redelivered after AckWait anyway
			w.handBack(iter)
			return nil
		}
	}
}

// applier writes the batches of one shard until its queue is closed. A batch
// takes what arrives within Linger of its first message, up to BatchSize:
// small batches when traffic is light (freshness), full ones when a backlog
// waits (throughput). The batch in hand when shutdown begins is finished;
// what is queued after it is handed back.
func (w *Worker) applier(ctx context.Context, in <-chan jetstream.Msg) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for first := range in {
		if ctx.Err() != nil {
			first.Nak() //nolint:errcheck // redelivered after AckWait anyway
			continue
		}
		b := batch{msgs: []jetstream.Msg{first}, started: time.Now()}
		timer.Reset(w.cfg.Linger)
	fill:
		for len(b.msgs) < w.cfg.BatchSize {
			select {
			case m, ok := <-in:
				if !ok {
					break fill
				}
				b.msgs = append(b.msgs, m)
			case <-timer.C:
				break fill
			}
		}
		timer.Stop()
		// A batch is finished even when shutdown begins meanwhile.
		w.process(context.WithoutCancel(ctx), b.msgs, b.started)
	}
}

// batch is what an applier writes at once.
type batch struct {
	msgs    []jetstream.Msg
	started time.Time
}

// handBack stops pulling and gives the messages already buffered in this
// client back to the stream at once, so other workers take them without
// waiting for their ack deadline.
func (w *Worker) handBack(iter jetstream.MessagesContext) {
	iter.Drain()
	for {
		m, err := iter.Next(jetstream.NextMaxWait(100 * time.Millisecond))
		if err != nil {
			return
		}
		m.Nak() //nolint:errcheck // redelivered after AckWait anyway
	}
}

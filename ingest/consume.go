package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
		if ctx.Err() != nil {
			// Stopped while the streams were not set up yet (NATS slow or
			// down): a stop like any other, not a failure.
			return nil
		}
		return err
	}
	// A pull the server no longer holds (seen once in two 300,000-update
	// runs: "no heartbeat received", 30 s without a message) is found by
	// its missing heartbeats: every 5 s here, so within 10 s, where the
	// library's defaults (30 s pulls, 15 s heartbeats) took 30. Not much
	// sooner: a heartbeat that only arrives late (a starved process) makes
	// the library pull again beside the pull still being served, and the
	// two can deliver more than the iterator's buffer of PullMaxMessages
	// holds. The rest is dropped ("slow consumer") and waits for AckWait:
	// with 2 s heartbeats, a test suite running beside two others stalled
	// ingest that way (docs/notes.md).
	//
	// The buffer is also the one place where the keeper cannot speak for a
	// message: delivered, its ack timer runs, but it is not received yet.
	// The collector takes the next BatchSize of it at each hand-off to an
	// applier, so a buffered message waits about two hand-offs: with the
	// default ack wait that is safe unless every applier stalls at once for
	// ~3 s (the runbook calls a batch p99 above 0.2 s slow). In such a
	// stall JetStream redelivers what waits here to a worker with room,
	// which is what a stall of this worker alone wants; the copy left here
	// is applied later as not newer. A smaller buffer would move less, and
	// was not measured for throughput (docs/notes.md).
	iter, err := cons.Messages(jetstream.PullMaxMessages(2*w.cfg.BatchSize),
		jetstream.PullExpiry(20*time.Second), jetstream.PullHeartbeat(5*time.Second))
	if err != nil {
		return fmt.Errorf("ingest: pull from %s: %w", w.cfg.Consumer, err)
	}
	defer iter.Stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the watchers end with Run

	go w.watchLag(ctx, cons)
	go w.watchStreams(ctx)
	go w.sweep(ctx)
	go w.foldCandles(ctx)

	w.log.Info("ingest consuming", "stream", w.cfg.Stream, "consumer", w.cfg.Consumer,
		"batch_size", w.cfg.BatchSize, "appliers", w.cfg.Appliers, "linger", w.cfg.Linger.String())
	// One collector forms batches — the first message that arrives, then
	// whatever follows within Linger of it, up to BatchSize — and several
	// appliers write them, so a batch is collected while others wait on
	// Postgres or Redis. A batch never holds a document that a batch in
	// flight renumbers (keysOf: a price's market, an event, a market and its
	// event): such messages wait for the next batch.
	// So two appliers of a process never write one price document at once
	// and never wait for each other's document locks, however hot a market
	// is, while batches stay as large as the traffic allows. (An event
	// message renumbers its markets' documents and may still meet another
	// batch's locks; so may other processes. The store's locks and revisions
	// keep that correct.) While every applier is busy, messages gather and
	// the next batch is larger.
	batches := make(chan batch)
	busy := newBusyKeys()
	// The keeper outlives the collector: appliers finish their batches
	// after a stop, and those messages must not be redelivered meanwhile.
	keeping := make(chan struct{})
	go w.keep.run(keeping)
	defer close(keeping)
	var wg sync.WaitGroup
	for range w.cfg.Appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				// A batch is finished even when shutdown begins meanwhile.
				w.process(context.WithoutCancel(ctx), b.msgs, b.started)
				busy.release(b.keys)
			}
		}()
	}
	err = w.collect(ctx, iter, batches, busy)
	close(batches)
	wg.Wait()
	return err
}

// batch is what the collector hands an applier.
type batch struct {
	msgs    []jetstream.Msg
	started time.Time
	keys    []string
}

// keysOf names the documents a message renumbers, as far as the message
// tells: a price's or trade's market, an event, a market and the event its
// body names. (An event message also renumbers its markets, which only
// Postgres knows.)
func keysOf(m jetstream.Msg) []string {
	subject := m.Subject()
	i := strings.LastIndexByte(subject, '.')
	j := strings.LastIndexByte(subject[:max(i, 0)], '.')
	if i < 0 || j < 0 {
		return []string{subject}
	}
	switch id := subject[i+1:]; subject[j+1 : i] {
	case KindEvent:
		return []string{"e:" + id}
	case KindMarket:
		var body struct {
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(m.Data(), &body) == nil && body.EventID != "" {
			return []string{"m:" + id, "e:" + body.EventID}
		}
		return []string{"m:" + id}
	default:
		return []string{"m:" + id}
	}
}

// busyKeys are the entities of the batches in flight.
type busyKeys struct {
	mu   sync.Mutex
	keys map[string]bool
	// freed receives a token when a batch's keys are released.
	freed chan struct{}
}

func newBusyKeys() *busyKeys {
	return &busyKeys{keys: map[string]bool{}, freed: make(chan struct{}, 1)}
}

// claim adds a message's documents ks to a forming batch's (mine, keys)
// unless a batch in flight holds one of them; it reports whether the message
// may join the batch.
func (b *busyKeys) claim(ks []string, mine map[string]bool, keys *[]string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range ks {
		if b.keys[k] && !mine[k] {
			return false
		}
	}
	for _, k := range ks {
		if !mine[k] {
			mine[k] = true
			b.keys[k] = true
			*keys = append(*keys, k)
		}
	}
	return true
}

// held reports whether a batch in flight other than the forming one (mine)
// holds one of ks.
func (b *busyKeys) held(ks []string, mine map[string]bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range ks {
		if b.keys[k] && !mine[k] {
			return true
		}
	}
	return false
}

func (b *busyKeys) release(keys []string) {
	b.mu.Lock()
	for _, k := range keys {
		delete(b.keys, k)
	}
	b.mu.Unlock()
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// collect forms batches until ctx is done. A batch takes what arrives within
// Linger of its first message, up to BatchSize new messages: small batches
// when traffic is light (freshness), full ones when a backlog waits
// (throughput).
// Messages held back because a batch in flight renumbers their documents
// join the first batch formed after it ends.
func (w *Worker) collect(ctx context.Context, iter jetstream.MessagesContext, out chan<- batch, busy *busyKeys) error {
	var held []jetstream.Msg
	// waiting are the documents of the held messages. A message of one waits
	// behind them, so one document's updates are applied in the order they
	// came: a newer version applied before an older one makes the older one
	// not newer, and its price would count in no candle.
	waiting := map[string]bool{}
	stop := func(msgs []jetstream.Msg) error {
		mine := append(held, msgs...)
		for _, m := range mine {
			m.Nak() //nolint:errcheck // redelivered after AckWait anyway
		}
		w.keep.release(mine)
		w.handBack(iter)
		return nil
	}
	for {
		var b batch
		mine := map[string]bool{}
		hold := func(m jetstream.Msg, ks []string) {
			held = append(held, m)
			for _, k := range ks {
				waiting[k] = true
			}
		}
		take := func(m jetstream.Msg, ks []string) {
			if !anyOf(ks, waiting) && busy.claim(ks, mine, &b.keys) {
				b.msgs = append(b.msgs, m)
			} else {
				hold(m, ks)
			}
		}
		// retry takes every held message whose documents are free now,
		// however many, in the order they came: held messages are mostly
		// repeated updates of a few hot markets, which the store deduplicates
		// to one row each, and capping them would let them pile up past their
		// ack deadline.
		retry := func() {
			old := held
			held = nil
			clear(waiting)
			for _, m := range old {
				take(m, keysOf(m))
			}
		}
		// add takes a new message; held messages of its documents, freed
		// since, go first.
		add := func(m jetstream.Msg) {
			ks := keysOf(m)
			if anyOf(ks, waiting) && !busy.held(ks, mine) {
				retry()
			}
			take(m, ks)
		}
		retry()
		for len(b.msgs) == 0 {
			if ctx.Err() != nil {
				return stop(nil)
			}
			if len(held) > 0 {
				// All held back: take a new message, or retry once a batch ends.
				select {
				case <-busy.freed:
					retry()
					continue
				default:
				}
				if m, err := w.receive(iter, jetstream.NextMaxWait(w.cfg.Linger)); err == nil {
					add(m)
				}
				continue
			}
			first, err := w.receive(iter, jetstream.NextContext(ctx))
			if err != nil {
				if ctx.Err() != nil {
					return stop(nil)
				}
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return fmt.Errorf("ingest: message iterator closed: %w", err)
				}
				w.log.Warn("ingest pull", "err", err)
				continue
			}
			add(first)
		}
		b.started = time.Now()
		deadline := b.started.Add(w.cfg.Linger)
		for len(b.msgs) < w.cfg.BatchSize {
			wait := time.Until(deadline)
			if wait <= 0 {
				break
			}
			m, err := w.receive(iter, jetstream.NextMaxWait(wait))
			if err != nil {
				break
			}
			add(m)
		}
		select {
		case out <- b:
		case <-ctx.Done():
			busy.release(b.keys)
			return stop(b.msgs)
		}
	}
}

// receive takes the next message from iter and holds it in the keeper
// until it is acknowledged or handed back.
func (w *Worker) receive(iter jetstream.MessagesContext, opt jetstream.NextOpt) (jetstream.Msg, error) {
	m, err := iter.Next(opt)
	if err == nil {
		w.keep.hold(m)
	}
	return m, err
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

func anyOf(ks []string, set map[string]bool) bool {
	for _, k := range ks {
		if set[k] {
			return true
		}
	}
	return false
}

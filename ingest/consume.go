package ingest

import (
	"context"
	"errors"
	"fmt"
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
	// One collector fills batches; several appliers write them, so a batch is
	// collected and decoded while others wait on Postgres or Redis. Appliers
	// may write updates of the same documents at once: the store's document
	// locks and revisions make that safe, exactly as for separate processes.
	// While every applier is busy, messages gather in the client's buffer and
	// the next batch is larger.
	batches := make(chan batch)
	var wg sync.WaitGroup
	for range w.cfg.Appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				// A batch is finished even when shutdown begins meanwhile.
				w.process(context.WithoutCancel(ctx), b.msgs, b.started)
			}
		}()
	}
	err = w.collect(ctx, iter, batches)
	close(batches)
	wg.Wait()
	return err
}

// batch is what the collector hands an applier.
type batch struct {
	msgs    []jetstream.Msg
	started time.Time
}

// collect reads batches until ctx is done. A batch takes what arrives within
// Linger of its first message, up to BatchSize: small batches when traffic
// is light (freshness), full ones when a backlog waits (throughput).
func (w *Worker) collect(ctx context.Context, iter jetstream.MessagesContext, out chan<- batch) error {
	for {
		first, err := iter.Next(jetstream.NextContext(ctx))
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
		b := batch{msgs: []jetstream.Msg{first}, started: time.Now()}
		deadline := b.started.Add(w.cfg.Linger)
		for len(b.msgs) < w.cfg.BatchSize {
			wait := time.Until(deadline)
			if wait <= 0 {
				break
			}
			m, err := iter.Next(jetstream.NextMaxWait(wait))
			if err != nil {
				break
			}
			b.msgs = append(b.msgs, m)
		}
		select {
		case out <- b:
		case <-ctx.Done():
			for _, m := range b.msgs {
				m.Nak() //nolint:errcheck // redelivered after AckWait anyway
			}
			w.handBack(iter)
			return nil
		}
	}
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

package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// setup creates the streams and the consumer, retrying with a doubling wait
// (0.25 s to 5 s) while NATS or JetStream does not answer, so a worker
// started while NATS is down begins consuming once it answers. It fails
// only when ctx ends. Failures are logged at the first try and then every
// 30 s.
func (w *Worker) setup(ctx context.Context) (jetstream.Consumer, error) {
	wait := 250 * time.Millisecond
	var lastLog time.Time
	for {
		cons, err := w.ensure(ctx)
		if err == nil {
			if !lastLog.IsZero() {
				w.log.Info("ingest: stream and consumer set up", "stream", w.cfg.Stream, "consumer", w.cfg.Consumer)
			}
			return cons, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ingest: set up stream %s: %w", w.cfg.Stream, ctx.Err())
		}
		if time.Since(lastLog) >= 30*time.Second {
			w.log.Warn("ingest: stream not set up; retrying", "stream", w.cfg.Stream, "err", err)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("ingest: set up stream %s: %w", w.cfg.Stream, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (w *Worker) ensure(ctx context.Context) (jetstream.Consumer, error) {
	if s := w.nc.Status(); s != nats.CONNECTED {
		return nil, fmt.Errorf("ingest: nats connection is %s", s)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := EnsureStreams(cctx, w.js, w.cfg, w.log); err != nil {
		return nil, err
	}
	return EnsureConsumer(cctx, w.js, w.cfg)
}

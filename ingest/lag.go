package ingest

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// watchLag samples the consumer's backlog every few seconds.
func (w *Worker) watchLag(ctx context.Context, cons jetstream.Consumer) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		info, err := cons.Info(ctx)
		if err == nil {
			w.metrics.Pending.Set(float64(info.NumPending + uint64(info.NumAckPending)))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

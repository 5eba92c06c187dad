package ingest

import (
	"context"
	"time"

	"github.com/marketdata/marketdata/store"
)

// sweep refreshes events whose resolved markets age out of retention, so that
// they leave the event read and the served set on time. How far it has come
// is kept in Postgres, so a restart (or a long outage) resumes where it was.
func (w *Worker) sweep(ctx context.Context) {
	if w.retention <= 0 {
		return
	}
	t := time.NewTicker(w.cfg.SweepEvery)
	defer t.Stop()
	for {
		if err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("ingest retention sweep", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepOverlap re-examines a little of the last sweep's window, so clocks
// that disagree slightly between workers lose nothing.
const sweepOverlap = 5 * time.Minute

// Sweep refreshes every event with a market whose retention ended since the
// last sweep (since ever, on the first), then records the new cut.
func (w *Worker) Sweep(ctx context.Context) error {
	cut := w.now().Add(-w.retention)
	from, ok, err := w.store.SweepCursor(ctx)
	if err != nil {
		return err
	}
	if ok {
		from = from.Add(-sweepOverlap)
	} else {
		from = time.Unix(0, 0)
	}
	ids, err := w.store.EventsResolvedBetween(ctx, from, cut)
	if err != nil {
		return err
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		res, err := w.store.ApplyBatch(ctx, &store.Batch{Touch: chunk})
		if err != nil {
			return err
		}
		n, err := w.cache.Apply(ctx, res)
		if n.Seq > 0 {
			w.notify(n) // also after a failed write: see apply
		}
		if err != nil {
			return err
		}
	}
	return w.store.SetSweepCursor(ctx, cut)
}

package ingest

import (
	"context"
	"time"

	"github.com/marketdata/marketdata/store"
)

// sweep runs the periodic upkeep: the candles' partitions and retention
// (sweepCandles), and the events whose resolved markets age out of
// retention, so that they leave the event read and the served set on time.
// How far the latter has come is kept in Postgres, so a restart (or a long
// outage) resumes where it was.
func (w *Worker) sweep(ctx context.Context) {
	t := time.NewTicker(w.cfg.SweepEvery)
	defer t.Stop()
	var made time.Time // when the candle partitions ahead were last made
	for {
		made = w.sweepCandles(ctx, made)
		if w.retention > 0 {
			if err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("ingest retention sweep", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// candlePartitionsEvery is how often the candle partitions ahead are made
// (at start, then daily): they cover two months ahead, so a day missed
// costs nothing.
const candlePartitionsEvery = 24 * time.Hour

// sweepCandles makes the candle partitions ahead when the last time was
// candlePartitionsEvery ago (never: made is zero), then ends the 1m
// retention of the months past it. It returns when the partitions were last
// made. Failures are logged and tried again at the next sweep: a missing
// partition costs nothing but a detour through the default one.
func (w *Worker) sweepCandles(ctx context.Context, made time.Time) time.Time {
	now := w.now()
	if made.IsZero() || now.Sub(made) >= candlePartitionsEvery {
		names, err := w.store.EnsureCandlePartitions(ctx, now)
		switch {
		case err != nil && ctx.Err() == nil:
			w.log.Warn("ingest candle partitions", "err", err)
		case err == nil:
			made = now
			if len(names) > 0 {
				w.log.Info("ingest candle partitions made", "partitions", names)
			}
		}
	}
	res, err := w.store.SweepCandles(ctx, now)
	if err != nil && ctx.Err() == nil {
		w.log.Warn("ingest candle retention sweep", "err", err)
	}
	if res.Deleted > 0 || len(res.Dropped) > 0 {
		w.log.Info("ingest candle retention", "deleted_rows", res.Deleted, "dropped", res.Dropped)
	}
	return made
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

// queueVacuumEvery is the least time between two vacuums of the candle
// queues. A vacuum rewrites the queues' statistics in pg_class, which makes
// every connection plan the batch statement again (3.3 ms a plan on this
// project's test machine, measured with pg_stat_statements' planning time);
// vacuuming after every fold, once a second, cost ingest's connections a
// plan each a second. The points queue holds a row per batch statement
// (migration 009), so ten seconds of dead rows are a few hundred there; the
// trades queue still holds a row per trade. The bound is per ingest process:
// N workers vacuum up to N times in 10 s.
const queueVacuumEvery = 10 * time.Second

// foldCandles folds the candle queues every FoldEvery (store.FoldCandles)
// until ctx ends, and vacuums the queues after a fold that took rows, at
// most once every queueVacuumEvery. Failures are logged; what was not
// folded waits in the queue (where reads take it) for the next fold, of
// this process or another.
func (w *Worker) foldCandles(ctx context.Context) {
	t := time.NewTicker(w.cfg.FoldEvery)
	defer t.Stop()
	var vacuumed time.Time
	fold := func(ctx context.Context) {
		res, err := w.store.FoldCandles(ctx, w.now())
		if err != nil && ctx.Err() == nil {
			w.log.Warn("ingest candle fold", "err", err)
		}
		w.metrics.CandlesFolded.WithLabelValues("point").Add(float64(res.Points))
		w.metrics.CandlesFolded.WithLabelValues("trade").Add(float64(res.Trades))
		if !res.Closed.IsZero() {
			w.metrics.CandlesClosed.Set(float64(res.Closed.Unix()))
		}
		if res.Points+res.Trades > 0 && time.Since(vacuumed) >= queueVacuumEvery {
			vacuumed = time.Now()
			if err := w.store.VacuumCandleQueues(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("ingest candle queues vacuum", "err", err)
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fold(ctx)
		}
	}
}

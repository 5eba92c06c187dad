package world

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"

	"github.com/marketdata/marketdata/bench/measure"
)

// batches cuts the world into store batches of about size entities, whole
// events at a time (an event, its markets and their prices), as a batch of
// ingest's would hold them after a feed's initial state.
func (w *ReadsWorld) batches(size int) []store.Batch {
	perBatch := max(1, size/(1+2*w.PerEvent))
	var out []store.Batch
	for e := 0; e < len(w.Events); e += perBatch {
		end := min(e+perBatch, len(w.Events))
		out = append(out, store.Batch{
			Events:  w.Events[e:end:end],
			Markets: w.Markets[e*w.PerEvent : end*w.PerEvent : end*w.PerEvent],
			Prices:  w.Prices[e*w.PerEvent : end*w.PerEvent : end*w.PerEvent],
		})
	}
	return out
}

// countContaining counts the titles that contain q and those that start
// with it, case-insensitively as search matches.
func (w *ReadsWorld) countContaining(q string) (contains, prefix int) {
	lq := strings.ToLower(q)
	for i := range w.Events {
		t := strings.ToLower(w.Events[i].Title)
		if strings.Contains(t, lq) {
			contains++
		}
		if strings.HasPrefix(t, lq) {
			prefix++
		}
	}
	return contains, prefix
}

// ReadsLoad is how the reads benchmark's data got into Postgres and Redis.
type ReadsLoad struct {
	Path            string  `json:"path"`
	Events          int     `json:"events"`
	Markets         int     `json:"markets"`
	Prices          int     `json:"prices"`
	Batches         int     `json:"batches"`
	BatchEntities   int     `json:"batch_entities_max"`
	Workers         int     `json:"workers"`
	GenerateSeconds float64 `json:"generate_seconds"`
	Seconds         float64 `json:"load_seconds"`
	EntitiesPerS    float64 `json:"entities_per_s"`
	Listed          int     `json:"listed_summaries"`
}

// loadPath says what the load does, in the result and the table.
const loadPath = "in-process store.ApplyBatch → cache.Apply per batch (ingest's path minus NATS: no JetStream, no change notices)"

// LoadReads writes the world through the store and the cache in the
// sandbox, workers batches at a time. Like an ingest worker at start, it
// first runs cache.EnsureComplete, which on the empty database rebuilds
// nothing and marks the listing complete; every batch then keeps it whole.
func LoadReads(ctx context.Context, sb *Sandbox, dsn string, w *ReadsWorld, batchSize, workers int, log *slog.Logger) (ReadsLoad, error) {
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		return ReadsLoad{}, err
	}
	defer pool.Close()
	st := store.New(pool)
	c := cache.New(sb.RDB, sb.Prefix, cache.Rules{Retention: 168 * time.Hour, Now: time.Now})
	if err := c.LoadScripts(ctx); err != nil {
		return ReadsLoad{}, err
	}
	if _, _, err := c.EnsureComplete(ctx, st); err != nil {
		return ReadsLoad{}, fmt.Errorf("ensure the listing is complete: %w", err)
	}
	bs := w.batches(batchSize)
	r := ReadsLoad{
		Path: loadPath, Events: len(w.Events), Markets: len(w.Markets), Prices: len(w.Prices),
		Batches: len(bs), BatchEntities: bs[0].Len(), Workers: workers,
	}
	log.Info("reads: loading", "events", r.Events, "markets", r.Markets, "batches", r.Batches, "workers", workers)
	start := time.Now()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *store.Batch)
	var applied, done atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				res, err := st.ApplyBatch(lctx, b)
				if err == nil {
					applied.Add(int64(len(res.Applied)))
					_, err = c.Apply(lctx, res)
				}
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					continue
				}
				if n := done.Add(1); n%100 == 0 {
					log.Info("reads: loading", "batches", n, "of", len(bs), "seconds", measure.Round2(time.Since(start).Seconds()))
				}
			}
		}()
	}
feed:
	for i := range bs {
		select {
		case work <- &bs[i]:
		case <-lctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return r, fmt.Errorf("load: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	el := time.Since(start)
	r.Seconds = measure.Round2(el.Seconds())
	want := int64(r.Events + r.Markets + r.Prices)
	r.EntitiesPerS = measure.Round2(float64(want) / el.Seconds())
	if got := applied.Load(); got != want {
		return r, fmt.Errorf("load: %d of %d updates applied", got, want)
	}
	ok, err := c.ListingComplete(ctx)
	if err != nil || !ok {
		return r, fmt.Errorf("load: the listing is not marked complete (err %v)", err)
	}
	sums, err := c.Summaries(ctx)
	if err != nil {
		return r, err
	}
	if r.Listed = len(sums); r.Listed != r.Events {
		return r, fmt.Errorf("load: %d events listed in Redis, want %d", r.Listed, r.Events)
	}
	log.Info("reads: loaded", "seconds", r.Seconds, "entities_per_s", r.EntitiesPerS)
	return r, nil
}

// OpenLoaded is Open with the reads world w loaded into the database and
// Redis (LoadReads, in the benchmarks' batches and workers).
func OpenLoaded(ctx context.Context, o *Options, log *slog.Logger, suffix string, w *ReadsWorld) (*Sandbox, string, ReadsLoad, error) {
	sb, dsn, err := Open(ctx, o, log, suffix)
	if err != nil {
		return nil, "", ReadsLoad{}, err
	}
	load, err := LoadReads(ctx, sb, dsn, w, ReadsBatch, ReadsWorkers, log)
	if err != nil {
		sb.Close()
		return nil, "", ReadsLoad{}, err
	}
	return sb, dsn, load, nil
}

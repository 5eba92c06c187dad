// Package ingest is the ingest benchmark: NATS → ingest → Postgres → Redis
// end to end against raw upserts, freshness at a paced rate, and the
// Postgres CPU of ingest's own backends per applied update.
package ingest

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// IngestParams size the ingest benchmark.
type IngestParams struct {
	Events    int     `json:"events"`
	PerEvent  int     `json:"markets_per_event"`
	K         int     `json:"updates"`
	BatchSize int     `json:"batch_size"`
	Window    int     `json:"publish_window"`
	Rate      float64 `json:"freshness_rate_per_s"`
	// FreshFor is how long the paced phase publishes.
	FreshFor time.Duration `json:"-"`
	FreshSec float64       `json:"freshness_duration_s"`
}

// Params are the figures: 5,000 markets, 100,000 updates,
// batches of 1,000, then 5,000 updates/s for 20 s.
var Params = IngestParams{
	Events: 1000, PerEvent: 5, K: 100_000, BatchSize: 1000, Window: 4096,
	Rate: 5000, FreshFor: 20 * time.Second,
}

// Flags lets a run shrink or grow the figures; the defaults are the
// issue's, and only they count against the goals.
func Flags(fs *flag.FlagSet, p *IngestParams) {
	fs.IntVar(&p.Events, "ingest.events", p.Events, "ingest: events (each with -ingest.markets markets)")
	fs.IntVar(&p.PerEvent, "ingest.markets", p.PerEvent, "ingest: markets per event")
	fs.IntVar(&p.K, "ingest.updates", p.K, "ingest: price updates of the end-to-end and raw phases")
	fs.Float64Var(&p.Rate, "ingest.rate", p.Rate, "ingest: updates per second of the freshness phase")
	fs.DurationVar(&p.FreshFor, "ingest.duration", p.FreshFor, "ingest: length of the freshness phase")
}

// Goals of the issue.
const (
	goalRatio         = 0.25
	goalFreshnessP99  = 250.0 // ms
	goalRateTolerance = 0.98  // of the target rate: 4,900/s at 5,000/s
)

func Run(ctx context.Context, o *world.Options, log *slog.Logger) (any, error) {
	p := Params
	p.FreshSec = p.FreshFor.Seconds()
	if p.Events < 1 || p.PerEvent < 1 || p.Rate <= 0 || p.FreshFor <= 0 {
		return nil, fmt.Errorf("ingest parameters must be positive: %+v", p)
	}
	res := &IngestResult{Bench: "ingest", Machine: o.Machine, Params: p}
	sb, err := world.NewSandbox(ctx, o, log)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	w := &world.World{Events: p.Events, PerEvent: p.PerEvent, SubjectPrefix: sb.Ingest.SubjectPrefix, Start: time.Now()}
	if p.K < w.Markets() {
		return nil, fmt.Errorf("updates %d must be at least the %d markets", p.K, w.Markets())
	}
	e2eRound := world.Round{Markets: w.Markets(), Base: 1, N: p.K}
	freshRound := world.Round{Markets: w.Markets(), Base: e2eRound.Final(0) + 1, N: int(p.Rate * p.FreshFor.Seconds())}
	if freshRound.N < w.Markets() {
		return nil, fmt.Errorf("freshness phase publishes %d updates, fewer than the %d markets", freshRound.N, w.Markets())
	}
	rows := w.Prices(e2eRound)

	// 1. The raw baseline, first, while nothing else of ours runs.
	if err := sb.MonitorPostgres(ctx); err != nil {
		return nil, err
	}
	if res.Raw, err = rawBaseline(ctx, sb, rows, p.BatchSize, log); err != nil {
		return nil, fmt.Errorf("raw baseline: %w", err)
	}

	// 2. Seed, then start ingest on the backlog.
	dsn, err := sb.Database(ctx, "ingest")
	if err != nil {
		return nil, err
	}
	if err := ingest.EnsureStreams(ctx, sb.JS, sb.Ingest, log); err != nil {
		return nil, err
	}
	pub, err := world.NewPublisher(sb.NC, p.Window)
	if err != nil {
		return nil, err
	}
	seed := w.Seed()
	seedStart := time.Now()
	if err := pub.PublishAll(ctx, seed); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	if err := pub.Wait(ctx, world.AckTimeout); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	log.Info("seed published", "messages", len(seed))
	res.ChildLog = filepath.Join(o.Out, "ingest-child.log")
	child, err := world.StartIngestChild(ctx, o, sb, dsn, res.ChildLog, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := child.Stop(15 * time.Second); err != nil {
			log.Warn("ingest child stop", "err", err)
		}
	}()
	log.Info("ingest started", "pid", child.Pid(), "admin", child.Admin, "log", res.ChildLog)
	if err := sb.Drained(ctx, world.DrainTimeout, child.Alive); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	res.Seed = SeedResult{Events: w.Events, Markets: w.Markets(), Messages: len(seed), Seconds: measure.Round2(time.Since(seedStart).Seconds())}
	c := cache.New(sb.RDB, sb.Prefix, cache.Rules{Now: time.Now})
	ids := w.MarketIDs()
	if err := checkServed(ctx, c, ids); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	log.Info("seed drained", "seconds", res.Seed.Seconds)

	// 3. End-to-end throughput.
	if res.EndToEnd, err = endToEnd(ctx, sb, child, pub, c, ids, w.PriceMsgs(rows), e2eRound, log); err != nil {
		return nil, fmt.Errorf("end-to-end: %w", err)
	}
	res.Ratio = measure.Round2(res.EndToEnd.UpdatesPerS / res.Raw.RowsPerS)

	// 4. Freshness at a paced rate.
	if res.Freshness, err = freshness(ctx, sb, child, pub, c, ids, w, freshRound, p.Rate, log); err != nil {
		return nil, fmt.Errorf("freshness: %w", err)
	}

	res.Goals = Goals{
		RatioGoal: goalRatio, RatioMet: res.Ratio >= goalRatio,
		FreshnessP99GoalMS: goalFreshnessP99, FreshnessP99Met: res.Freshness.P99MS <= goalFreshnessP99,
		RateGoal: goalRateTolerance * p.Rate, RateMet: res.Freshness.AchievedRate >= goalRateTolerance*p.Rate,
	}
	res.Goals.PGPerAppliedGoalUS = world.GoalPGPerAppliedUS
	res.Goals.PGPerAppliedMet = res.EndToEnd.Ingest.PG != nil && res.EndToEnd.Ingest.PGPerAppliedUS <= world.GoalPGPerAppliedUS
	res.Goals.AllMet = res.Goals.RatioMet && res.Goals.FreshnessP99Met && res.Goals.RateMet && res.Goals.PGPerAppliedMet
	res.Print()
	return res, nil
}

// rawBaseline upserts rows with store.UpsertPrices in batches, from one
// goroutine, into a fresh database: what Postgres alone takes.
func rawBaseline(ctx context.Context, sb *world.Sandbox, rows []store.Price, batch int, log *slog.Logger) (RawResult, error) {
	dsn, err := sb.Database(ctx, "raw")
	if err != nil {
		return RawResult{}, err
	}
	pool, err := store.Connect(ctx, world.WithAppName(dsn, "raw"))
	if err != nil {
		return RawResult{}, err
	}
	defer pool.Close()
	st := store.New(pool)
	// Batches are deduplicated by market as ingest's store.Batch does (a
	// batch may not hold a market twice), outside the timed loop.
	var batches [][]store.Price
	want := 0
	for i := 0; i < len(rows); i += batch {
		b := store.Batch{Prices: slices.Clone(rows[i:min(i+batch, len(rows))])}
		b.Dedup()
		batches = append(batches, b.Prices)
		want += len(b.Prices)
	}
	log.Info("raw baseline", "rows", len(rows), "batch_size", batch)
	pg := world.PGStart(ctx, sb.PG)
	start, applied := time.Now(), 0
	for _, b := range batches {
		n, err := st.UpsertPrices(ctx, b)
		if err != nil {
			return RawResult{}, err
		}
		applied += n
	}
	el := time.Since(start)
	pgCPU := pg.End(ctx)
	if applied != want {
		return RawResult{}, fmt.Errorf("%d of %d rows applied", applied, want)
	}
	r := RawResult{Rows: len(rows), Batches: len(batches), BatchSize: batch, Seconds: measure.Round2(el.Seconds()),
		RowsPerS: measure.Round2(float64(len(rows)) / el.Seconds())}
	if pgCPU != nil && applied > 0 {
		r.PGPerRowUS = measure.Round2(1e6 * pgCPU.Seconds["raw"] / float64(applied))
	}
	log.Info("raw baseline done", "seconds", r.Seconds, "rows_per_s", r.RowsPerS)
	return r, nil
}

// checkServed makes sure every seeded market's price item exists and is
// served, so that each later price update renders a body.
func checkServed(ctx context.Context, c *cache.Cache, ids []string) error {
	for i := 0; i < len(ids); i += 500 {
		entries, err := c.Markets(ctx, ids[i:min(i+500, len(ids))])
		if err != nil {
			return err
		}
		for k, e := range entries {
			if !e.Found || !e.Served {
				return fmt.Errorf("market %s is not cached as served after the seed (found %v)", ids[i+k], e.Found)
			}
		}
	}
	return nil
}

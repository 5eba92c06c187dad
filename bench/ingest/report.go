package ingest

import (
	"fmt"
	"strings"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// IngestResult is everything the ingest benchmark measured; it is written
// to bench-results/ingest.json.
type IngestResult struct {
	Bench     string          `json:"bench"`
	Machine   world.Machine   `json:"machine"`
	Params    IngestParams    `json:"params"`
	Seed      SeedResult      `json:"seed"`
	Raw       RawResult       `json:"raw_upsert"`
	EndToEnd  EndToEndResult  `json:"end_to_end"`
	Ratio     float64         `json:"ratio_e2e_to_raw"`
	Freshness FreshnessResult `json:"freshness"`
	Goals     Goals           `json:"goals"`
	ChildLog  string          `json:"child_log"`
}

// SeedResult is the initial state: published, then drained by ingest.
type SeedResult struct {
	Events   int     `json:"events"`
	Markets  int     `json:"markets"`
	Messages int     `json:"messages"`
	Seconds  float64 `json:"seconds"`
}

// RawResult is the store.UpsertPrices baseline.
type RawResult struct {
	Rows      int     `json:"rows"`
	Batches   int     `json:"batches"`
	BatchSize int     `json:"batch_size"`
	Seconds   float64 `json:"seconds"`
	RowsPerS  float64 `json:"rows_per_s"`
	// PGPerRowUS is its Postgres backend's CPU per row applied: what the
	// store's upsert costs Postgres, beside ingest's per applied update.
	PGPerRowUS float64 `json:"postgres_cpu_per_row_us"`
}

// EndToEndResult is the unpaced phase.
type EndToEndResult struct {
	Updates        int              `json:"updates"`
	PublishSeconds float64          `json:"publish_seconds"`
	PublishRate    float64          `json:"publish_rate_per_s"`
	Seconds        float64          `json:"seconds_to_all_visible"`
	UpdatesPerS    float64          `json:"updates_per_s"`
	Ingest         world.IngestSide `json:"ingest"`
}

// FreshnessResult is the paced phase.
type FreshnessResult struct {
	Updates        int     `json:"updates"`
	TargetRate     float64 `json:"target_rate_per_s"`
	AchievedRate   float64 `json:"achieved_rate_per_s"`
	PublishSeconds float64 `json:"publish_seconds"`
	FreshnessStats
	Ingest world.IngestSide `json:"ingest"`
}

// Goals are the targets and whether this run met them.
type Goals struct {
	RatioGoal          float64 `json:"ratio_goal"`
	RatioMet           bool    `json:"ratio_met"`
	FreshnessP99GoalMS float64 `json:"freshness_p99_goal_ms"`
	FreshnessP99Met    bool    `json:"freshness_p99_met"`
	RateGoal           float64 `json:"publish_rate_goal_per_s"`
	RateMet            bool    `json:"publish_rate_met"`
	// PGPerApplied is the end-to-end phase's Postgres CPU (ingest's own
	// backends) per applied update (issue 18).
	PGPerAppliedGoalUS float64 `json:"postgres_cpu_per_applied_update_goal_us"`
	PGPerAppliedMet    bool    `json:"postgres_cpu_per_applied_update_met"`
	AllMet             bool    `json:"all_met"`
}

// Print writes the human table on stdout.
func (r *IngestResult) Print() {
	m, p := r.Machine, r.Params
	fmt.Printf("\ningest benchmark — %d cores, %s, %s, bin %q, load at start %s\n",
		m.NumCPU, m.GoVersion, m.Date.Format("2006-01-02 15:04 MST"), m.BinVersion, m.LoadAvg)
	tw := measure.NewTable()
	row := func(cells ...string) { tw.Rowf("%s\n", strings.Join(cells, "\t")) }
	e, f := r.EndToEnd, r.Freshness
	row("seed", fmt.Sprintf("%d events × %d markets (%d messages) published and drained in %.2f s",
		r.Seed.Events, p.PerEvent, r.Seed.Messages, r.Seed.Seconds))
	row("raw upsert", fmt.Sprintf("%d rows, %d batches of %d, one goroutine: %.2f s; Postgres CPU %.1f µs a row", r.Raw.Rows, r.Raw.Batches, r.Raw.BatchSize, r.Raw.Seconds, r.Raw.PGPerRowUS),
		fmt.Sprintf("%.0f rows/s", r.Raw.RowsPerS))
	row("end-to-end", fmt.Sprintf("%d updates published in %.2f s (%.0f/s); all visible in Redis after %.2f s",
		e.Updates, e.PublishSeconds, e.PublishRate, e.Seconds), fmt.Sprintf("%.0f updates/s", e.UpdatesPerS))
	row("ratio", fmt.Sprintf("end-to-end / raw = %.2f (goal ≥ %.2f)", r.Ratio, r.Goals.RatioGoal), measure.Met(r.Goals.RatioMet))
	row("freshness", fmt.Sprintf("%d updates at %.0f/s: achieved %.0f/s over %.2f s (need ≥ %.0f/s)",
		f.Updates, f.TargetRate, f.AchievedRate, f.PublishSeconds, r.Goals.RateGoal), measure.Met(r.Goals.RateMet))
	row("", fmt.Sprintf("p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  max %.1f ms  mean %.1f ms  (n=%d, unmeasured %d, notices %d)",
		f.P50MS, f.P90MS, f.P99MS, f.MaxMS, f.MeanMS, f.Count, f.Unmeasured, f.Notices))
	row("", fmt.Sprintf("p99 goal ≤ %.0f ms", r.Goals.FreshnessP99GoalMS), measure.Met(r.Goals.FreshnessP99Met))
	row("postgres", fmt.Sprintf("CPU of ingest's own backends per applied update, end-to-end: %.1f µs (goal ≤ %.0f µs)",
		e.Ingest.PGPerAppliedUS, r.Goals.PGPerAppliedGoalUS), measure.Met(r.Goals.PGPerAppliedMet))
	for _, ph := range []struct {
		name string
		s    world.IngestSide
	}{{"end-to-end", e.Ingest}, {"freshness", f.Ingest}} {
		s := ph.s
		row("/metrics "+ph.name, fmt.Sprintf("freshness p50 %.1f / p99 %.1f ms; batch time p50 %.1f / p99 %.1f ms (mean %.1f); %.0f batches, mean %.1f msgs; applied %.0f, ignored %.0f, failures %.0f",
			s.Freshness.P50MS, s.Freshness.P99MS, s.BatchTime.P50MS, s.BatchTime.P99MS, s.BatchTime.MeanMS,
			s.Batches, s.MeanBatch, s.Applied, s.Ignored, s.Failures))
		row("cpu "+ph.name, fmt.Sprintf("%s; machine busy %.0f%%", measure.Cores(s.CPU.Cores), s.CPU.MachineBusy))
		if s.PG != nil {
			row("postgres "+ph.name, fmt.Sprintf("Postgres CPU per applied update %.1f µs (goal ≤ %.0f; ingest's backends %.2f s over %.0f applied); this run's backends: %s",
				s.PGPerAppliedUS, world.GoalPGPerAppliedUS, s.PG.Seconds["ingest"], s.Applied, s.PG))
		}
		if s.CandleClose {
			row("candles "+ph.name, "a 5m candle bucket was closed in this phase: its close is in the Postgres CPU and the freshness above")
		}
	}
	tw.Print()
	verdict := "all goals met"
	if !r.Goals.AllMet {
		verdict = "GOALS NOT MET (see above)"
	}
	fmt.Printf("ingest: %s; child log %s\n\n", verdict, r.ChildLog)
}

package world

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/marketdata/marketdata/ingest"

	"github.com/marketdata/marketdata/bench/measure"
)

// IngestSide is what the ingest process reported and used during a phase.
type IngestSide struct {
	CPU       measure.CPUUsage    `json:"cpu"`
	Applied   float64             `json:"prices_applied"`
	Ignored   float64             `json:"prices_ignored"`
	Batches   float64             `json:"batches"`
	MeanBatch float64             `json:"mean_batch_messages"`
	Failures  float64             `json:"failures"`
	Freshness measure.HistSummary `json:"metric_freshness"`
	BatchTime measure.HistSummary `json:"metric_batch_time"`
	// PG is the Postgres CPU of the run's own backends (by child) over the
	// phase; PGPerAppliedUS is ingest's backends' µs per applied price.
	PG             *PGCPU  `json:"postgres_cpu,omitempty"`
	PGPerAppliedUS float64 `json:"postgres_cpu_per_applied_update_us"`
	// CandleClose: ingest closed a 5m candle bucket during the phase (the
	// fold's mark moved); a world loaded at once closes as one statement of
	// seconds, which the phase's Postgres CPU and freshness include.
	CandleClose bool `json:"candle_close"`
}

// CandleMark is ingest's metric of the fold's mark: it moves when a 5m
// candle bucket is closed.
const CandleMark = "marketdata_ingest_candles_closed_timestamp_seconds"

// Phase deadlines; the whole benchmark stays under its 3-minute timeout.
// DrainTimeout bounds a phase's wait for ingest to drain its stream (-drain:
// a 250k-market world's seed takes minutes).
var DrainTimeout = 60 * time.Second

const (
	VisibleTimeout = 90 * time.Second
	AckTimeout     = 30 * time.Second
	PollEvery      = 50 * time.Millisecond
)

// StartIngestChild starts `marketdata ingest` on the sandbox's streams
// (created if absent) and database, logging to logPath: the one way every
// benchmark runs ingest.
func StartIngestChild(ctx context.Context, o *Options, sb *Sandbox, dsn, logPath string, log *slog.Logger) (*Child, error) {
	if err := ingest.EnsureStreams(ctx, sb.JS, sb.Ingest, log); err != nil {
		return nil, err
	}
	child, err := StartChild(ctx, o.Bin, ingestArgs(sb.Ingest), []string{
		"MD_DATABASE_URL=" + WithAppName(dsn, "ingest"), "MD_REDIS_URL=" + o.RedisURL, "MD_REDIS_PREFIX=" + sb.Prefix, "MD_NATS_URL=" + o.NATSURL,
	}, logPath)
	if err != nil {
		return nil, fmt.Errorf("start ingest: %w", err)
	}
	return child, nil
}

// ingestArgs are the arguments of `marketdata ingest` on the streams,
// subjects and consumer of ic.
func ingestArgs(ic ingest.Config) []string {
	return []string{"ingest",
		"--stream", ic.Stream, "--subject-prefix", ic.SubjectPrefix,
		"--dlq-stream", ic.DLQStream, "--dlq-prefix", ic.DLQPrefix,
		"--notice-subject", ic.NoticeSubject, "--consumer", ic.Consumer,
		"--batch-size", strconv.Itoa(ic.BatchSize), "--ack-wait", ic.AckWait.String(),
	}
}

// phaseStart samples what a phase's figures are differences of.
type phaseStart struct {
	metrics measure.Scrape
	cpu     measure.CPUSample
	pg      PGPhase
}

// StartPhase starts measuring ingest's phase; pg, when not nil, attributes
// Postgres CPU to the run's own backends.
func StartPhase(ctx context.Context, child *Child, pg *PGMonitor) (phaseStart, error) {
	m, err := child.Metrics(ctx)
	return phaseStart{metrics: m, cpu: measure.SampleCPU(child.Pid()), pg: PGStart(ctx, pg)}, err
}

// End measures the phase since ps: CPU, and the ingest metrics' changes.
func (ps phaseStart) End(ctx context.Context, child *Child) (IngestSide, error) {
	cpu := measure.SampleCPU(child.Pid()).UsageSince(ps.cpu)
	pg := ps.pg.End(ctx)
	m, err := child.Metrics(ctx)
	if err != nil {
		return IngestSide{}, err
	}
	d := m.Sub(ps.metrics)
	side := IngestSide{
		CPU:         cpu,
		Applied:     d[`marketdata_ingest_messages_total{kind="price",outcome="applied"}`],
		Ignored:     d[`marketdata_ingest_messages_total{kind="price",outcome="ignored"}`],
		Batches:     d["marketdata_ingest_batches_total"],
		Freshness:   d.SecondsHistogram("marketdata_ingest_freshness_seconds"),
		BatchTime:   d.SecondsHistogram("marketdata_ingest_batch_seconds"),
		CandleClose: m[CandleMark] > ps.metrics[CandleMark],
	}
	if n := d["marketdata_ingest_batch_messages_count"]; n > 0 {
		side.MeanBatch = measure.Round2(d["marketdata_ingest_batch_messages_sum"] / n)
	}
	for _, stage := range []string{"postgres", "redis", "rejects"} {
		side.Failures += d[`marketdata_ingest_failures_total{stage="`+stage+`"}`]
	}
	if side.PG = pg; pg != nil && side.Applied > 0 {
		side.PGPerAppliedUS = measure.Round2(1e6 * pg.Seconds["ingest"] / side.Applied)
	}
	return side, nil
}

// IngestBacklog is how many messages ingest has not yet acknowledged.
func IngestBacklog(ctx context.Context, sb *Sandbox) (uint64, error) {
	cons, err := sb.JS.Consumer(ctx, sb.Ingest.Stream, sb.Ingest.Consumer)
	if err != nil {
		return 0, fmt.Errorf("ingest backlog: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("ingest backlog: %w", err)
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// GoalPGPerAppliedUS bounds the Postgres CPU of ingest's own backends per
// applied price update (issue 18's goal), in every benchmark that runs ingest.
const GoalPGPerAppliedUS = 50.0

// StopIngest stops an ingest child for a deferred call: its stop error
// changes no figure, so it is logged, as the bench's own.
func StopIngest(c *Child, log *slog.Logger, bench string) {
	if err := c.Stop(15 * time.Second); err != nil {
		log.Warn(bench+": ingest stop", "err", err)
	}
}

package ingest

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Message outcomes, the "outcome" label of marketdata_ingest_messages_total.
const (
	OutcomeApplied  = "applied"
	OutcomeIgnored  = "ignored"
	OutcomeRejected = "rejected"
)

// Metrics are the ingest worker's Prometheus series.
type Metrics struct {
	Messages  *prometheus.CounterVec
	Batches   prometheus.Counter
	BatchSize prometheus.Histogram
	BatchTime prometheus.Histogram
	Freshness prometheus.Histogram
	Pending   prometheus.Gauge
	Failures  *prometheus.CounterVec
	// ProgressAcks counts progress acks: messages held past part of the
	// ack wait (a slow batch, a busy market) that JetStream must not
	// redeliver.
	ProgressAcks prometheus.Counter
	// StreamReplicas and StreamReplicasWanted are the copies of each stream
	// that are there now (leader and current replicas) and the copies
	// configured (MD_STREAM_REPLICAS); set by StreamHealth.
	StreamReplicas       *prometheus.GaugeVec
	StreamReplicasWanted *prometheus.GaugeVec
	// CandlesFolded counts the candle points and trades folded from the
	// queues into the 1m store and the coarse tables, by kind.
	CandlesFolded *prometheus.CounterVec
	// CandlesClosed is the fold's mark: the coarse candle tables hold
	// everything before it.
	CandlesClosed prometheus.Gauge
}

// NewMetrics registers the ingest series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		Messages: f.NewCounterVec(prometheus.CounterOpts{
			Name: "marketdata_ingest_messages_total",
			Help: "Ingest messages by kind and outcome (applied, ignored as not newer, rejected as invalid).",
		}, []string{"kind", "outcome"}),
		Batches: f.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_ingest_batches_total",
			Help: "Batches committed to Postgres and written to Redis.",
		}),
		BatchSize: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "marketdata_ingest_batch_messages",
			Help:    "Messages per batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		BatchTime: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "marketdata_ingest_batch_seconds",
			Help:    "Time from a batch's first message in hand to its acknowledgement: Postgres, Redis and notice.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		Freshness: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "marketdata_ingest_freshness_seconds",
			Help:    "Time from a message's arrival in the stream to its data being visible in Redis.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		Pending: f.NewGauge(prometheus.GaugeOpts{
			Name: "marketdata_ingest_consumer_pending",
			Help: "Consumer lag: messages in the stream not yet delivered plus delivered but not acknowledged.",
		}),
		Failures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "marketdata_ingest_failures_total",
			Help: "Batches that failed and were handed back for redelivery, by stage.",
		}, []string{"stage"}),
		ProgressAcks: f.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_ingest_progress_acks_total",
			Help: "Progress acknowledgements sent for messages held past an eighth of the ack wait (a slow batch, a busy market), so that JetStream does not redeliver them.",
		}),
		StreamReplicas: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "marketdata_ingest_stream_replicas",
			Help: "Copies of each JetStream stream there now: its leader and the replicas that are current (0: no leader; 1 on a single server).",
		}, []string{"stream"}),
		StreamReplicasWanted: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "marketdata_ingest_stream_replicas_wanted",
			Help: "Replicas each JetStream stream should have (MD_STREAM_REPLICAS); fewer there is reported on /readyz.",
		}, []string{"stream"}),
		CandlesFolded: f.NewCounterVec(prometheus.CounterOpts{
			Name: "marketdata_ingest_candles_folded_total",
			Help: "Candle price points and trades folded from the queues ingest writes into the 1m store and the coarse candle tables, by kind (point, trade).",
		}, []string{"kind"}),
		CandlesClosed: f.NewGauge(prometheus.GaugeOpts{
			Name: "marketdata_ingest_candles_closed_timestamp_seconds",
			Help: "How far the candle fold has closed 5m buckets (Unix time): the coarse candle tables hold every point and trade before it. It trails the clock by 1 to 6 minutes; more means the fold is behind.",
		}),
	}
}

// AntiEntropyMetrics are the anti-entropy pass's series.
type AntiEntropyMetrics struct {
	Checked     prometheus.Counter
	Repaired    *prometheus.CounterVec
	PassSeconds prometheus.Histogram
	LastPass    prometheus.Gauge
}

// NewAntiEntropyMetrics registers the anti-entropy series on reg.
func NewAntiEntropyMetrics(reg prometheus.Registerer) *AntiEntropyMetrics {
	f := promauto.With(reg)
	return &AntiEntropyMetrics{
		Checked: f.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_ingest_antientropy_checked_total",
			Help: "Cache documents and trade lists the anti-entropy pass compared with Postgres.",
		}),
		Repaired: f.NewCounterVec(prometheus.CounterOpts{
			Name: "marketdata_ingest_antientropy_repaired_total",
			Help: "Cache entries the anti-entropy pass found behind Postgres or missing and rewrote, by kind (event, listing, market, trades).",
		}, []string{"kind"}),
		PassSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "marketdata_ingest_antientropy_pass_seconds",
			Help:    "Duration of a full anti-entropy pass over every document (periodic walk or after a topology change).",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 14),
		}),
		LastPass: f.NewGauge(prometheus.GaugeOpts{
			Name: "marketdata_ingest_antientropy_last_pass_timestamp_seconds",
			Help: "Unix time at which the last full anti-entropy pass ended.",
		}),
	}
}

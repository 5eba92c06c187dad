// Package ingest consumes matcher updates from NATS JetStream: validate, write
// a batch to Postgres (versioned), write its snapshots to Redis, then
// acknowledge and publish a change notice.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// Store is what the worker needs of the source of truth.
type Store interface {
	ApplyBatch(ctx context.Context, b *store.Batch) (*store.Result, error)
	InsertRejects(ctx context.Context, rejects []store.Reject) error
	EventsResolvedBetween(ctx context.Context, from, to time.Time) ([]string, error)
	SweepCursor(ctx context.Context) (time.Time, bool, error)
	SetSweepCursor(ctx context.Context, at time.Time) error
	EnsureCandlePartitions(ctx context.Context, now time.Time) ([]string, error)
	SweepCandles(ctx context.Context, now time.Time) (store.CandleSweep, error)
	FoldCandles(ctx context.Context, now time.Time) (store.FoldResult, error)
	VacuumCandleQueues(ctx context.Context) error
}

// Cache is what the worker needs of the snapshots. Apply returns the
// change number the write took, which the change notice names.
type Cache interface {
	Apply(ctx context.Context, res *store.Result) (notice.Change, error)
}

var (
	_ Store = (*store.Store)(nil)
	_ Cache = (*cache.Cache)(nil)
)

// Worker is one ingest process's consumer loop.
type Worker struct {
	cfg     Config
	nc      *nats.Conn
	js      jetstream.JetStream
	store   Store
	cache   Cache
	metrics *Metrics
	log     *slog.Logger
	now     func() time.Time
	// keep sends progress acks for the messages the worker holds.
	keep *keeper
	// retention is how long a resolved market stays served (for the sweeper).
	retention time.Duration
}

// Deps are the worker's collaborators.
type Deps struct {
	NC        *nats.Conn
	Store     Store
	Cache     Cache
	Metrics   *Metrics
	Log       *slog.Logger
	Now       func() time.Time
	Retention time.Duration
}

// New returns a worker; call Run to consume. It refuses a cfg it cannot run
// with (see Config).
func New(cfg Config, d Deps) (*Worker, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if d.Metrics == nil {
		return nil, errors.New("ingest: Deps.Metrics is nil")
	}
	js, err := jetstream.New(d.NC)
	if err != nil {
		return nil, fmt.Errorf("ingest: jetstream: %w", err)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Worker{
		cfg: cfg, nc: d.NC, js: js, store: d.Store, cache: d.Cache,
		metrics: d.Metrics, log: d.Log, now: d.Now, retention: d.Retention,
		keep: newKeeper(cfg.AckWait, d.Metrics.ProgressAcks),
	}, nil
}

// inflight is one delivered message with what was made of it.
type inflight struct {
	msg     jetstream.Msg
	meta    *jetstream.MsgMetadata
	update  *Update
	reject  *store.Reject
	version int64
}

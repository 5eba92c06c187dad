package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/ratelog"
	"github.com/marketdata/marketdata/internal/retry"
	"github.com/marketdata/marketdata/store"
)

func (c *cli) ingestCmd() *cobra.Command {
	var ic ingest.Config
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Consume matcher updates from NATS JetStream into Postgres and Redis snapshots",
		Long:  "Consume matcher updates from NATS JetStream into Postgres and Redis snapshots.\n\n" + envHelp(forIngest, false),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(c.getenv, secretsUnused)
			if err != nil {
				return err
			}
			applyReplicas(cmd.Flags(), cfg, &ic)
			if err := validateIngest(&ic); err != nil {
				return err
			}
			log, err := c.logger()
			if err != nil {
				return err
			}
			log.Debug("garbage collection", "gogc", tuneIngestGC())
			return runIngest(cmd.Context(), cfg, ic, log, newRegistry(), nil)
		},
	}
	ingestFlags(cmd.Flags(), &ic)
	return cmd
}

// runIngest runs one ingest worker with its admin server until ctx is done.
// ready, when not nil, is called once the admin server listens.
//
// The worker starts while any dependency is down and reports not ready on
// /readyz until each answers: it consumes once the schema is checked (see
// watchSchema) and its stream and consumer are set up (ingest retries that
// while NATS is down).
func runIngest(ctx context.Context, cfg *Config, ic ingest.Config, log *slog.Logger, reg *prometheus.Registry, ready func(admin string)) error {
	return runIngestOn(ctx, cfg, nil, ic, log, reg, ready)
}

// runIngestOn is runIngest with its admin server on adminLn when the caller
// bound it (nil: on MD_ADMIN_ADDR).
func runIngestOn(ctx context.Context, cfg *Config, adminLn net.Listener, ic ingest.Config, log *slog.Logger, reg *prometheus.Registry, ready func(admin string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, closeStore, err := openPool("MD_DATABASE_URL", cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer closeStore()
	fatal := make(chan error, 1)
	schema := watchSchema(ctx, []*store.Store{st}, log, fatal)
	select {
	case err := <-fatal:
		return err
	default:
	}
	rdb, nc, err := openCaches(cfg, "marketdata ingest", log)
	if err != nil {
		return err
	}
	defer rdb.Close()
	defer nc.Close()

	cch := newCache(rdb, cfg)
	// Anti-entropy: repairs cache writes lost in a Redis failover.
	aec := ingest.DefaultAntiEntropyConfig()
	aec.NoticeSubject = ic.NoticeSubject
	ae, err := ingest.NewAntiEntropy(aec, ingest.AntiEntropyDeps{
		Store: st, Cache: cch, NC: nc, Metrics: ingest.NewAntiEntropyMetrics(reg), Log: log,
	})
	if err != nil {
		return err
	}
	if err := observeRedis(rdb, reg, log); err != nil {
		return err
	}
	w, err := ingest.New(ic, ingest.Deps{
		NC: nc, Store: st, Cache: ae.WatchWrites(cch), Metrics: ingest.NewMetrics(reg), Log: log,
		Retention: cfg.ResolvedRetention,
	})
	if err != nil {
		return err
	}
	// Ingest is ready only while it can do its work: every dependency is
	// required (an ingest worker draining is harmless: the others, or it
	// later, take the messages; nothing is lost while JetStream keeps them).
	adminLn, err = listen(adminLn, "MD_ADMIN_ADDR", cfg.AdminAddr)
	if err != nil {
		return err
	}
	admin, err := startAdminOn(adminLn, reg, []check{
		required("schema", schema.check),
		required("postgres", st.Ping),
		required("redis", redisCheck(rdb)),
		required("jetstream", func(ctx context.Context) error {
			// Short replicas keep the worker ready, reported as degraded.
			short, err := w.StreamHealth(ctx)
			if err == nil && short != "" {
				err = &partialError{short}
			}
			return err
		}),
	}, log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		admin.Close(sctx) //nolint:errcheck // stopping: a slow probe cut off is not an error of the worker
	}()
	if ready != nil {
		ready(admin.Addr())
	}
	// Nothing is written before the schema is known to be this binary's.
	if err := waitSchema(ctx, schema, fatal); err != nil {
		if ctx.Err() != nil {
			log.Info("ingest stopped")
			return nil
		}
		return err
	}
	go ae.Run(ctx)
	go keepComplete(ctx, cch, st, func() error { return ingest.PublishFlush(nc, ic.NoticeSubject) }, log)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	select {
	case err = <-ran:
	case err = <-fatal:
		cancel()
		if rerr := <-ran; rerr != nil && !errors.Is(rerr, context.Canceled) {
			log.Warn("ingest worker stopped with an error after a fatal one", "err", rerr)
		}
	}
	log.Info("ingest stopped")
	return err
}

// waitSchema returns nil once the schema gate passed, the refusal when the
// schema is not this binary's, or ctx's error.
func waitSchema(ctx context.Context, g *schemaGate, fatal <-chan error) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !g.ok.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-fatal:
			return err
		case <-t.C:
		}
	}
	return nil
}

// keepComplete rebuilds the cache whenever Redis does not hold the whole
// listing (the first start, or Redis lost its data). It checks at start and
// then every minute; after a failed check it retries within 1 s, doubling
// to 5 s. One worker rebuilds at a time (a lock in Redis). After a rebuild,
// flush tells API nodes to drop what they hold from the cache.
func keepComplete(ctx context.Context, c *cache.Cache, st *store.Store, flush func() error, log *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	wait := retry.Backoff{First: time.Second, Max: 5 * time.Second}
	warn := &ratelog.Limiter{Every: time.Minute}
	for {
		rebuilt, stats, err := c.EnsureComplete(ctx, st)
		switch {
		case err != nil && ctx.Err() == nil:
			warn.Log(ctx, log, slog.LevelWarn, "cache completeness check failed; retrying", "err", err)
			// Redis or Postgres is down: try again within seconds rather
			// than a minute, so a Redis that comes back empty is refilled
			// soon.
			t.Reset(wait.Next())
		case err == nil:
			if wait.Retrying() {
				t.Reset(time.Minute)
				wait.Reset()
				// The next outage's first failure is logged at once.
				warn = &ratelog.Limiter{Every: time.Minute}
			}
			if rebuilt {
				log.Info("cache rebuilt: Redis did not hold the whole listing", "events", stats.Events,
					"markets", stats.Markets, "trade_lists", stats.TradeLists, "pruned", stats.Pruned)
				if err := flush(); err != nil {
					log.Warn("flush notice not sent; API nodes drop what they hold within 2 s", "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

func (c *cli) ingestCmd() *cobra.Command {
	var ic ingest.Config
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Consume matcher updates from NATS JetStream into Postgres and Redis snapshots",
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
			return runIngest(cmd.Context(), cfg, ic, log, newRegistry(), nil)
		},
	}
	ingestFlags(cmd.Flags(), &ic)
	return cmd
}

// runIngest runs one ingest worker with its admin server until ctx is done.
// ready, when not nil, is called once the worker is about to consume.
func runIngest(ctx context.Context, cfg *Config, ic ingest.Config, log *slog.Logger, reg *prometheus.Registry, ready func(admin string)) error {
	st, closeStore, err := openStore(ctx, "MD_DATABASE_URL", cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer closeStore()
	rdb, nc, err := connectCaches(ctx, cfg, "marketdata ingest", log)
	if err != nil {
		return err
	}
	defer rdb.Close()
	defer nc.Close()

	cch := newCache(rdb, cfg)
	w, err := ingest.New(ic, ingest.Deps{
		NC: nc, Store: st, Cache: cch, Metrics: ingest.NewMetrics(reg), Log: log,
		Retention: cfg.ResolvedRetention,
	})
	if err != nil {
		return err
	}
	admin, err := startAdmin(cfg.AdminAddr, reg, readiness(st, rdb, nc), log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		admin.Close(sctx) //nolint:errcheck
	}()
	go keepComplete(ctx, cch, st, func() error { return ingest.PublishFlush(nc, ic.NoticeSubject) }, log)
	if ready != nil {
		ready(admin.Addr())
	}
	err = w.Run(ctx)
	log.Info("ingest stopped")
	return err
}

// keepComplete rebuilds the cache whenever Redis does not hold the whole
// listing (the first start, or Redis lost its data): at start, then every
// minute. One worker does it at a time (a lock in Redis). After a rebuild,
// flush tells API nodes to drop what they hold from the cache.
func keepComplete(ctx context.Context, c *cache.Cache, st *store.Store, flush func() error, log *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		rebuilt, stats, err := c.EnsureComplete(ctx, st)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("cache completeness check", "err", err)
		case rebuilt:
			log.Info("cache rebuilt: Redis did not hold the whole listing", "events", stats.Events,
				"markets", stats.Markets, "trade_lists", stats.TradeLists, "pruned", stats.Pruned)
			if err := flush(); err != nil {
				log.Warn("flush notice not sent; API nodes drop what they hold within 2 s", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

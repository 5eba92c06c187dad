package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

func (c *cli) cacheCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cache", Short: "Operate on the Redis snapshots"}
	var noticeSubject string
	rebuild := &cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild every Redis snapshot from Postgres (safe while ingest runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSubject("--notice-subject", noticeSubject); err != nil {
				return err
			}
			ctx := cmd.Context()
			return c.withStore(ctx, func(st *store.Store, cfg *Config) error {
				rdb, err := connectRedis(ctx, cfg.Redis)
				if err != nil {
					return err
				}
				defer rdb.Close()
				if err := c.rebuild(ctx, st, newCache(rdb, cfg)); err != nil {
					return err
				}
				c.notifyRebuilt(cfg, noticeSubject)
				return nil
			})
		},
	}
	noticeFlag(rebuild.Flags(), &noticeSubject, "where to tell API nodes that the cache was rebuilt (ingest's --notice-subject)")
	cmd.AddCommand(rebuild)
	return cmd
}

func (c *cli) rebuild(ctx context.Context, st *store.Store, cch *cache.Cache) error {
	started := time.Now()
	stats, err := cch.Rebuild(ctx, st)
	if err != nil {
		return err
	}
	took := time.Since(started)
	return c.print(map[string]any{
		"events": stats.Events, "markets": stats.Markets, "trade_lists": stats.TradeLists,
		"pruned": stats.Pruned, "renumbered": stats.Renumbered, "seconds": took.Seconds(),
	}, fmt.Sprintf("rebuilt %d event, %d market and %d trade-list documents, pruned %d stale entries, renumbered %d revisions, in %s",
		stats.Events, stats.Markets, stats.TradeLists, stats.Pruned, stats.Renumbered, took.Round(time.Millisecond)))
}

// notifyRebuilt tells API nodes that the cache was rebuilt, so that they
// drop the price items and pages they hold and reload search (else they
// keep them up to 2 s, and search up to 60 s).
func (c *cli) notifyRebuilt(cfg *Config, subject string) {
	log, _ := c.logger()
	if log == nil {
		log = slog.Default()
	}
	const notSent = "flush notice not sent; API nodes drop held prices and pages within 2 s and reload search within 60 s"
	nc, err := connectNATS(cfg.NATSURL, "marketdata cli", log)
	if err != nil {
		log.Warn(notSent, "err", err)
		return
	}
	defer nc.Close()
	err = ingest.PublishFlush(nc, subject)
	if err == nil && nc.IsReconnecting() {
		err = errors.New("NATS is reconnecting: the notice would be lost when the command exits")
	}
	if err != nil {
		log.Warn(notSent, "err", err)
	}
}

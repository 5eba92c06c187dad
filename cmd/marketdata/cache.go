package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

func (c *cli) cacheCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cache", Short: "Operate on the Redis snapshots"}
	cmd.AddCommand(&cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild every Redis snapshot from Postgres (safe while ingest runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return c.withStore(ctx, func(st *store.Store, cfg *Config) error {
				rdb, err := connectRedis(ctx, cfg.RedisURL)
				if err != nil {
					return err
				}
				defer rdb.Close()
				return c.rebuild(ctx, st, newCache(rdb, cfg))
			})
		},
	})
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

package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

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
			cfg, err := LoadConfig(c.getenv, secretsUnused)
			if err != nil {
				return err
			}
			pool, err := connectPostgres(ctx, "MD_DATABASE_URL", cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer pool.Close()
			st := store.New(pool)
			if err := st.CheckSchema(ctx); err != nil {
				return err
			}
			rdb, err := connectRedis(ctx, cfg.RedisURL)
			if err != nil {
				return err
			}
			defer rdb.Close()
			started := time.Now()
			stats, err := newCache(rdb, cfg).Rebuild(ctx, st)
			if err != nil {
				return err
			}
			took := time.Since(started)
			return c.print(map[string]any{
				"events": stats.Events, "markets": stats.Markets, "trade_lists": stats.TradeLists,
				"pruned": stats.Pruned, "seconds": took.Seconds(),
			}, fmt.Sprintf("rebuilt %d event, %d market and %d trade-list documents, pruned %d stale entries, in %s",
				stats.Events, stats.Markets, stats.TradeLists, stats.Pruned, took.Round(time.Millisecond)))
		},
	})
	return cmd
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

func (c *cli) devCmd() *cobra.Command {
	o := feedOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run migrate + ingest + feed in one process on local services, with demo data",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg, err := LoadConfig(c.getenv, secretsRandom)
			if err != nil {
				return err
			}
			log, err := c.logger()
			if err != nil {
				return err
			}
			applied, err := store.Migrate(ctx, cfg.DatabaseURL)
			if err != nil {
				return err
			}
			log.Info("schema migrated", "version", store.SchemaVersion(), "applied", applied)
			ic := ingest.Config{}.Defaults()
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error {
				return runIngest(gctx, cfg, ic, log, newRegistry(), func(admin string) {
					fmt.Fprintf(c.stdout, "\nmarketdata dev is running (Ctrl-C stops it)\n"+
						"  ingest metrics:  curl -s http://%s/metrics | grep marketdata_ingest\n"+
						"  readiness:       curl -s http://%s/readyz\n"+
						"  synthetic feed:  %d events, %.0f messages/s\n\n", admin, admin, o.events, o.rate)
				})
			})
			g.Go(func() error {
				_, err := runFeed(gctx, cfg.NATSURL, ic, o, log)
				return err
			})
			return g.Wait()
		},
	}
	o.flags(cmd, 200, 50)
	return cmd
}

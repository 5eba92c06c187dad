package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

func (c *cli) devCmd() *cobra.Command {
	o := feedOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run migrate + ingest + api + feed in one process on local services, with a demo account and key",
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
			secret, err := demoKey(ctx, cfg)
			if err != nil {
				return err
			}

			// Both servers report in; the banner goes out once both listen.
			var mu sync.Mutex
			var ingestAdmin, apiAddr, apiAdmin string
			banner := func() {
				if ingestAdmin == "" || apiAddr == "" {
					return
				}
				_, _ = fmt.Fprintf(c.stdout, // a closed terminal has no banner to show
					"\nmarketdata dev is running (Ctrl-C stops it)\n"+
						"  API:             http://%s  (admin http://%s)\n"+
						"  demo key:        %s\n"+
						"  try:             curl -s -H 'Authorization: Bearer %s' http://%s/public/v1/key\n"+
						"  API metrics:     curl -s http://%s/metrics | grep -E 'marketdata_(http|ratelimit)'\n"+
						"  ingest metrics:  curl -s http://%s/metrics | grep marketdata_ingest\n"+
						"  synthetic feed:  %d events, %.0f messages/s\n\n",
					apiAddr, apiAdmin, secret, secret, apiAddr, apiAdmin, ingestAdmin, o.events, o.rate)
			}
			ic := ingest.DefaultConfig()
			ic.Replicas = cfg.StreamReplicas
			apiCfg := *cfg
			apiCfg.AdminAddr = "127.0.0.1:0" // the ingest side has MD_ADMIN_ADDR
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error {
				return runIngest(gctx, cfg, ic, log, newRegistry(), func(admin string) {
					mu.Lock()
					defer mu.Unlock()
					ingestAdmin = admin
					banner()
				})
			})
			g.Go(func() error {
				return runAPI(gctx, &apiCfg, ic.NoticeSubject, log, newRegistry(), func(addr, admin string) {
					mu.Lock()
					defer mu.Unlock()
					apiAddr, apiAdmin = addr, admin
					banner()
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

// demoKey creates an account with access and a key with every scope, and
// returns the key's secret (valid for this process: the pepper is random).
func demoKey(ctx context.Context, cfg *Config) (string, error) {
	st, closeStore, err := openStore(ctx, "MD_DATABASE_URL", cfg.DatabaseURL)
	if err != nil {
		return "", err
	}
	defer closeStore()
	now := time.Now()
	a, err := st.CreateAccount(ctx, "demo", now)
	if err != nil {
		return "", err
	}
	if _, err := st.SetAccess(ctx, a.ID, true, now); err != nil {
		return "", err
	}
	secret := store.NewSecret()
	_, err = st.CreateKey(ctx, store.NewKey{
		AccountID: a.ID, SecretHash: store.HashSecret(cfg.KeyPepper, secret), Last4: secret[len(secret)-4:],
		Scopes: store.KnownScopes, CreatedAt: now, ExpiresAt: now.Add(store.DefaultKeyLifetime),
	})
	return secret, err
}

package main

import (
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
	var ic ingest.Config
	var statePath string
	var reset bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run migrate + ingest + api + feed + the docs site in one process on local services, with a demo account and key",
		Long: "Run migrate + ingest + api + feed + the docs site in one process on local services, with a demo account and key.\n\n" +
			"The demo key, and the cursor secret and key pepper it depends on, are kept in a state file\n" +
			"(--state) so the same key works after a restart; --reset starts over with new ones.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			// The flags are refused before anything is touched; MD_STREAM_REPLICAS,
			// which --replicas defaults to, is checked with the configuration.
			flagsOnly := ic
			if !cmd.Flags().Changed("replicas") {
				flagsOnly.Replicas = 1
			}
			if err := validateIngest(&flagsOnly); err != nil {
				return err
			}
			ctx := cmd.Context()
			log, err := c.logger()
			if err != nil {
				return err
			}
			sess, err := prepareDev(ctx, c.getenv, statePath, reset, time.Now())
			if err != nil {
				return err
			}
			cfg, secret := sess.cfg, sess.secret
			applyReplicas(cmd.Flags(), cfg, &ic)
			keyNote := "kept in " + sess.statePath + "; --reset makes a new one"
			if sess.newKey {
				keyNote = "new; kept in " + sess.statePath + " for the next start"
			}
			log.Info("dev ready to start", "schema", store.SchemaVersion(), "state", sess.statePath, "new_key", sess.newKey)

			// The servers report in; the banner goes out once all listen.
			var mu sync.Mutex
			var ingestAdmin, apiAddr, apiAdmin, docsAddr string
			apiBound := make(chan string, 1)
			banner := func() {
				if ingestAdmin == "" || apiAddr == "" || docsAddr == "" {
					return
				}
				_, _ = fmt.Fprintf(c.stdout, // a closed terminal has no banner to show
					"\nmarketdata dev is running (Ctrl-C stops it)\n"+
						"  API:             http://%s  (admin http://%s)\n"+
						"  docs site:       http://%s  (reference and try-it panel: paste the demo key)\n"+
						"  demo key:        %s  (%s)\n"+
						"  try:             curl -s -H 'Authorization: Bearer %s' http://%s/public/v1/key\n"+
						"  in a shell:      export MD_KEY=%s  (README: every route, the Go client's examples)\n"+
						"  API metrics:     curl -s http://%s/metrics | grep -E 'marketdata_(http|ratelimit)'\n"+
						"  ingest metrics:  curl -s http://%s/metrics | grep marketdata_ingest\n"+
						"  synthetic feed:  %d events, %.0f messages/s\n\n",
					apiAddr, apiAdmin, docsAddr, secret, keyNote, secret, apiAddr, secret, apiAdmin, ingestAdmin, o.events, o.rate)
			}
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
					apiBound <- addr
					banner()
				})
			})
			g.Go(func() error {
				// The try-it panel calls this API: the address it bound, unless
				// MD_DOCS_API_URL names others (MD_HTTP_ADDR may be :0).
				var addr string
				select {
				case addr = <-apiBound:
				case <-gctx.Done():
					return nil
				}
				docsCfg := *cfg
				if c.getenv("MD_DOCS_API_URL") == "" {
					// As a browser on this machine reaches it: 0.0.0.0 and
					// [::] are not addresses a page can call.
					urls, err := docsAPIURLs("", addr)
					if err != nil {
						return err
					}
					docsCfg.DocsAPIURLs = urls
				}
				return runDocs(gctx, &docsCfg, log, func(addr string) {
					mu.Lock()
					defer mu.Unlock()
					docsAddr = addr
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
	ingestFlags(cmd.Flags(), &ic)
	cmd.Flags().StringVar(&statePath, "state", defaultDevStatePath(c.getenv), "file that keeps the demo key and dev's secrets between runs")
	cmd.Flags().BoolVar(&reset, "reset", false, "start over: new cursor secret, key pepper, demo account and key")
	return cmd
}

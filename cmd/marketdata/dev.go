package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/marketdata/marketdata/api/edge"
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
			"(--state) so the same key works after a restart; --reset starts over with new ones.\n\n" +
			"Dev-only settings: the failed-authentication limit does not apply to loopback clients; the docs\n" +
			"origin follows MD_DOCS_ADDR unless MD_DOCS_ORIGIN is set; MD_MAX_CONNS is lowered to fit the\n" +
			"open-file limit; every port is checked free before anything is migrated or published.\n\n" +
			envHelp(forAPI|forIngest|forFeed|forDocs, true),
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
			// Every port dev serves on is bound before anything is migrated
			// or published: a second dev on busy ports stops here, naming
			// the port, and leaves the first one's stream alone.
			addrs, err := LoadConfig(c.getenv, secretsUnused)
			if err != nil {
				return err
			}
			lns, err := bindDev(addrs)
			if err != nil {
				return err
			}
			defer lns.close()
			sess, err := prepareDev(ctx, c.getenv, statePath, reset, time.Now())
			if err != nil {
				return err
			}
			cfg, secret := sess.cfg, sess.secret
			applyReplicas(cmd.Flags(), cfg, &ic)
			notes, err := applyDevSettings(cfg, c.getenv, lns.docs.Addr().String(), edge.RaiseFileLimit)
			if err != nil {
				return err
			}
			keyCreate := "marketdata key create --dev --scopes markets:read"
			if sess.statePath != defaultDevStatePath(c.getenv) {
				keyCreate += " --state " + sess.statePath
			}
			keyNote := "kept in " + sess.statePath + "; --reset makes a new one"
			if sess.newKey {
				keyNote = "new; kept in " + sess.statePath + " for the next start"
			}
			log.Info("dev ready to start", "schema", store.SchemaVersion(), "state", sess.statePath, "new_key", sess.newKey,
				"max_conns", cfg.MaxConns, "docs_origin", cfg.DocsOrigin)

			// The servers report in; the banner goes out once all listen.
			var mu sync.Mutex
			var ingestAdmin, apiAddr, apiAdmin, docsAddr string
			banner := func() {
				if ingestAdmin == "" || apiAddr == "" || docsAddr == "" {
					return
				}
				_, _ = fmt.Fprintf(c.stdout, // a closed terminal has no banner to show
					"\nmarketdata dev is running (Ctrl-C stops it)\n"+
						"  API:             http://%s  (admin http://%s, a free port each start)\n"+
						"  docs site:       http://%s  (reference and try-it panel: paste the demo key)\n"+
						"  demo key:        %s  (%s)\n"+
						"  try:             curl -s -H 'Authorization: Bearer %s' http://%s/public/v1/key\n"+
						"  in a shell:      export MD_KEY=%s  (README: every route, the Go client's examples)\n"+
						"  more keys:       %s  (in the demo account)\n"+
						"  API metrics:     curl -s http://%s/metrics | grep -E 'marketdata_(http|ratelimit)'\n"+
						"  ingest metrics:  curl -s http://%s/metrics | grep marketdata_ingest\n"+
						"  synthetic feed:  %d events, %.0f messages/s\n"+
						"  dev settings:    %s\n\n",
					apiAddr, apiAdmin, docsAddr, secret, keyNote, secret, apiAddr, secret, keyCreate, apiAdmin, ingestAdmin, o.events, o.rate,
					notes.banner())
			}
			apiCfg := *cfg
			apiCfg.AdminAddr = lns.apiAdmin.Addr().String() // the ingest side has MD_ADMIN_ADDR
			docsCfg := *cfg
			if c.getenv("MD_DOCS_API_URL") == "" {
				// The try-it panel calls the API as a browser on this
				// machine reaches it: 0.0.0.0 and [::] are not addresses a
				// page can call, and MD_HTTP_ADDR may be :0.
				urls, err := docsAPIURLs("", lns.http.Addr().String())
				if err != nil {
					return err
				}
				docsCfg.DocsAPIURLs = urls
			}
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error {
				return runIngestOn(gctx, cfg, lns.ingestAdmin, ic, log, newRegistry(), func(admin string) {
					mu.Lock()
					defer mu.Unlock()
					ingestAdmin = admin
					banner()
				})
			})
			g.Go(func() error {
				return runAPIOn(gctx, &apiCfg, bound{http: lns.http, admin: lns.apiAdmin}, ic.NoticeSubject, log, newRegistry(), func(addr, admin string) {
					mu.Lock()
					defer mu.Unlock()
					apiAddr, apiAdmin = addr, admin
					banner()
				})
			})
			g.Go(func() error {
				return runDocsOn(gctx, lns.docs, &docsCfg, log, func(addr string) {
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

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/ratelimit"
)

func (c *cli) apiCmd() *cobra.Command {
	noticeSubject := defaultNoticeSubject
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Run one stateless HTTP API node (run N of them behind any load balancer)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(c.getenv, secretsRequired)
			if err != nil {
				return err
			}
			log, err := c.logger()
			if err != nil {
				return err
			}
			return runAPI(cmd.Context(), cfg, noticeSubject, log, newRegistry(), nil)
		},
	}
	cmd.Flags().StringVar(&noticeSubject, "notice-subject", noticeSubject, "subject of ingest's change notices (ingest's --notice-subject)")
	return cmd
}

// runAPI runs one API node with its admin server until ctx is done, then
// drains in-flight requests. ready, when not nil, gets the bound addresses.
func runAPI(ctx context.Context, cfg *Config, noticeSubject string, log *slog.Logger, reg *prometheus.Registry, ready func(httpAddr, adminAddr string)) error {
	st, closeStore, err := openStore(ctx, "MD_DATABASE_READ_URL", cfg.DatabaseReadURL)
	if err != nil {
		return err
	}
	defer closeStore()
	// Keys are read from the primary: a lagging replica could hand back a
	// key just revoked, and caching it would outlast the contract's 1 s.
	keys := st
	if cfg.DatabaseReadURL != cfg.DatabaseURL {
		primary, closePrimary, err := openStore(ctx, "MD_DATABASE_URL", cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer closePrimary()
		keys = primary
	}
	rdb, nc, err := connectCaches(ctx, cfg, "marketdata api", log)
	if err != nil {
		return err
	}
	defer rdb.Close()
	defer nc.Close()

	id := make([]byte, 6)
	rand.Read(id) //nolint:errcheck // never fails
	presence := api.NewPresence(nc, "", hex.EncodeToString(id), 2*time.Second)
	go func() {
		if err := presence.Run(ctx); err != nil {
			log.Error("api presence not announced; the Redis-outage fallback counts this node alone", "err", err)
		}
	}()
	limiter := ratelimit.New(rdb, ratelimit.Config{
		Limit: cfg.RateLimit, Window: cfg.RateWindow,
		AuthFailLimit: cfg.AuthFailLimit, AuthFailWindow: cfg.AuthFailWindow,
		Prefix: cfg.RedisPrefix,
	}, presence.Count, time.Now)
	if err := limiter.Register(reg); err != nil {
		return err
	}
	srv, err := api.New(api.Config{
		DocsOrigin: cfg.DocsOrigin, AppOrigins: cfg.AppOrigins, TrustedProxies: cfg.TrustedProxies,
		KeyPepper: cfg.KeyPepper, CursorSecret: cfg.CursorSecret, KeyNoticeSubject: KeyNoticeSubject,
		NoticeSubject: noticeSubject, MaxConns: cfg.MaxConns,
	}, api.Deps{
		Credentials: keys, Cache: newCache(rdb, cfg), Fallback: st,
		Limiter: limiter, NC: nc, Log: log, Registry: reg,
	})
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	api.WarnFileLimit(log, cfg.MaxConns)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return &configError{"MD_HTTP_ADDR", "cannot listen: " + err.Error()}
	}
	admin, err := startAdmin(cfg.AdminAddr, reg, readiness(st, rdb, nc), log)
	if err != nil {
		ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("api listening", "addr", ln.Addr().String())
	if ready != nil {
		ready(ln.Addr().String(), admin.Addr())
	}

	select {
	case <-ctx.Done():
	case err := <-served:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	// Stop accepting, drain in-flight requests, then the admin server.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	admin.Close(sctx) //nolint:errcheck
	log.Info("api stopped")
	return err
}

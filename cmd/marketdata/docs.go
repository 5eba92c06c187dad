package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/docs"
	"github.com/marketdata/marketdata/docs/site"
)

func (c *cli) docsCmd() *cobra.Command {
	var apiURLs []string
	cmd := &cobra.Command{
		Use:   "docs",
		Short: "Serve the documentation site (reference of every route and a try-it panel) on MD_DOCS_ADDR",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(c.getenv, secretsUnused)
			if err != nil {
				return err
			}
			if len(apiURLs) > 0 {
				var list []string
				for _, u := range apiURLs {
					if u = strings.TrimRight(strings.TrimSpace(u), "/"); u == "" {
						continue
					}
					if _, err := site.APIOrigin(u); err != nil {
						return &configError{"--api-url", err.Error()}
					}
					list = append(list, u)
				}
				if len(list) > 0 {
					cfg.DocsAPIURLs = list
				}
			}
			log, err := c.logger()
			if err != nil {
				return err
			}
			return runDocs(cmd.Context(), cfg, log, nil)
		},
	}
	cmd.Flags().StringSliceVar(&apiURLs, "api-url", nil,
		"API base URL the try-it panel calls (repeat or comma-separate for several; the first is preselected); overrides MD_DOCS_API_URL (default http://MD_HTTP_ADDR)")
	return cmd
}

// runDocs serves the documentation site on cfg.DocsAddr until ctx is done,
// then lets requests in flight finish (at most 10 s). ready, when not nil,
// gets the bound address.
func runDocs(ctx context.Context, cfg *Config, log *slog.Logger, ready func(addr string)) error {
	ln, err := net.Listen("tcp", cfg.DocsAddr)
	if err != nil {
		return &configError{"MD_DOCS_ADDR", "cannot listen: " + err.Error()}
	}
	return runDocsOn(ctx, ln, cfg, log, ready)
}

// docsServer is the HTTP server of the documentation site.
func docsServer(cfg *Config, log *slog.Logger) (*http.Server, error) {
	s, err := site.New(site.Config{Spec: docs.OpenAPIYAML, APIURLs: cfg.DocsAPIURLs, DocsOrigin: cfg.DocsOrigin})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", s)
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}, nil
}

// runDocsOn is runDocs on a listener the caller bound (tests bind first so
// the docs origin is known and the port cannot be taken in between); ln is
// closed when it returns.
func runDocsOn(ctx context.Context, ln net.Listener, cfg *Config, log *slog.Logger, ready func(addr string)) error {
	srv, err := docsServer(cfg, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	return serveDocs(ctx, srv, ln, cfg, log, ready)
}

// serveDocs serves srv on ln until ctx is done.
func serveDocs(ctx context.Context, srv *http.Server, ln net.Listener, cfg *Config, log *slog.Logger, ready func(addr string)) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("docs listening", "addr", ln.Addr().String(), "origin", cfg.DocsOrigin, "api_urls", cfg.DocsAPIURLs)
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	log.Info("docs stopped")
	return err
}

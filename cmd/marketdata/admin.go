package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// check is one readiness probe of a dependency.
type check struct {
	name string
	fn   func(context.Context) error
}

// newRegistry returns a registry with the Go runtime and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// adminServer serves /healthz (alive), /readyz (dependencies answer) and
// /metrics on MD_ADMIN_ADDR.
type adminServer struct {
	srv *http.Server
	ln  net.Listener
}

func startAdmin(addr string, reg *prometheus.Registry, checks []check, log *slog.Logger) (*adminServer, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`)) //nolint:errcheck
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		failed := map[string]string{}
		for _, c := range checks {
			if err := c.fn(ctx); err != nil {
				failed[c.name] = err.Error()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]any{"status": "unavailable", "failed": failed}) //nolint:errcheck
			return
		}
		w.Write([]byte(`{"status":"ready"}`)) //nolint:errcheck
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	// Profiles for operators; the admin address is not the public one.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &configError{"MD_ADMIN_ADDR", "cannot listen: " + err.Error()}
	}
	a := &adminServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server", "err", err)
		}
	}()
	log.Info("admin listening", "addr", ln.Addr().String())
	return a, nil
}

// Addr is the address the admin server listens on.
func (a *adminServer) Addr() string { return a.ln.Addr().String() }

// Close stops the admin server.
func (a *adminServer) Close(ctx context.Context) error { return a.srv.Shutdown(ctx) }

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// check is one readiness probe of a dependency or of the node's own state.
// A failing required check makes /readyz answer 503 (send no traffic); a
// failing degradable one leaves it 200 with the failure reported under
// "degraded" (the node still answers correctly, with less redundancy).
type check struct {
	name       string
	fn         func(context.Context) error
	degradable bool
}

// required and degradable build checks.
func required(name string, fn func(context.Context) error) check {
	return check{name: name, fn: fn}
}

func degradable(name string, fn func(context.Context) error) check {
	return check{name: name, fn: fn, degradable: true}
}

// partialError is what a check returns when its dependency answers but part
// of it is down and routed around (a Redis Cluster replica, or a master
// whose slots another node now serves): reported as degraded, never as a
// failure, whether the check is required or not.
type partialError struct{ reason string }

func (e *partialError) Error() string { return e.reason }

// readiness is one evaluation of the checks.
type readiness struct {
	failed, degraded map[string]string
}

// The statuses /readyz answers, the "status" label of marketdata_readyz_status.
const (
	statusReady       = "ready"
	statusDegraded    = "degraded"
	statusUnavailable = "unavailable"
)

// status is what /readyz answers for r: unavailable (503) when a required
// check failed, degraded when only degradable ones did, else ready.
func (r readiness) status() string {
	switch {
	case len(r.failed) > 0:
		return statusUnavailable
	case len(r.degraded) > 0:
		return statusDegraded
	default:
		return statusReady
	}
}

// readinessMetrics are the series each evaluation sets, so that alerts see
// what /readyz would answer without probing it: a degraded node keeps its
// traffic and would otherwise go unnoticed.
type readinessMetrics struct {
	up     *prometheus.GaugeVec // marketdata_dependency_up{dependency}
	status *prometheus.GaugeVec // marketdata_readyz_status{status}
}

func newReadinessMetrics(reg prometheus.Registerer) (*readinessMetrics, error) {
	m := &readinessMetrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "marketdata_dependency_up",
			Help: "1 while the readiness check of a dependency (or of the node's own state) passes, else 0.",
		}, []string{"dependency"}),
		status: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "marketdata_readyz_status",
			Help: "1 for the status /readyz answers at the latest check (ready, degraded or unavailable), 0 for the others.",
		}, []string{"status"}),
	}
	for _, c := range []prometheus.Collector{m.up, m.status} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("admin: register metrics: %w", err)
		}
	}
	return m, nil
}

// evaluate runs every check at once (a slow one does not delay the others)
// and sets marketdata_dependency_up for each and marketdata_readyz_status.
func evaluate(ctx context.Context, checks []check, m *readinessMetrics) readiness {
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.fn(ctx)
		}()
	}
	wg.Wait()
	r := readiness{failed: map[string]string{}, degraded: map[string]string{}}
	for i, c := range checks {
		v := 1.0
		var partial *partialError
		switch {
		case errors.As(errs[i], &partial):
			r.degraded[c.name] = partial.reason
		case errs[i] != nil:
			v = 0
			if c.degradable {
				r.degraded[c.name] = errs[i].Error()
			} else {
				r.failed[c.name] = errs[i].Error()
			}
		}
		m.up.WithLabelValues(c.name).Set(v)
	}
	now := r.status()
	for _, st := range []string{statusReady, statusDegraded, statusUnavailable} {
		v := 0.0
		if st == now {
			v = 1
		}
		m.status.WithLabelValues(st).Set(v)
	}
	return r
}

// newRegistry returns a registry with the Go runtime and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// adminServer serves /healthz (alive), /readyz (the checks pass) and
// /metrics on MD_ADMIN_ADDR.
type adminServer struct {
	srv  *http.Server
	ln   net.Listener
	stop context.CancelFunc
}

// readyPoll is how often the checks run without a /readyz request, so that
// marketdata_dependency_up and marketdata_readyz_status stay current for
// dashboards and alerts.
const readyPoll = 5 * time.Second

func startAdmin(addr string, reg *prometheus.Registry, checks []check, log *slog.Logger) (*adminServer, error) {
	ln, err := listen(nil, "MD_ADMIN_ADDR", addr)
	if err != nil {
		return nil, err
	}
	return startAdminOn(ln, reg, checks, log)
}

// startAdminOn is startAdmin on a listener already bound; ln is closed
// when the server cannot start.
func startAdminOn(ln net.Listener, reg *prometheus.Registry, checks []check, log *slog.Logger) (*adminServer, error) {
	m, err := newReadinessMetrics(reg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`)) //nolint:errcheck // the prober went away: nothing to tell it
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		res := evaluate(ctx, checks, m)
		w.Header().Set("Content-Type", "application/json")
		body := map[string]any{"status": res.status()}
		if len(res.degraded) > 0 {
			body["degraded"] = res.degraded
		}
		if len(res.failed) > 0 {
			body["failed"] = res.failed
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		b, _ := json.Marshal(body) // maps of strings always encode
		w.Write(b)                 //nolint:errcheck // the prober went away: nothing to tell it
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	// Profiles for operators; the admin address is not the public one.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	pctx, stop := context.WithCancel(context.Background())
	a := &adminServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, stop: stop}
	go func() {
		t := time.NewTicker(readyPoll)
		defer t.Stop()
		for {
			ctx, cancel := context.WithTimeout(pctx, 2*time.Second)
			evaluate(ctx, checks, m)
			cancel()
			select {
			case <-pctx.Done():
				return
			case <-t.C:
			}
		}
	}()
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
func (a *adminServer) Close(ctx context.Context) error {
	a.stop()
	return a.srv.Shutdown(ctx)
}

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/internal/metrictest"
)

// TestAdminEndpoints: /healthz answers while the process runs, /readyz names
// the dependency that fails, /metrics serves the registry.
func TestAdminEndpoints(t *testing.T) {
	reg := newRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "marketdata_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	var redisDown, natsDown atomic.Bool
	admin, err := startAdmin("127.0.0.1:0", reg, []check{
		required("postgres", func(context.Context) error { return nil }),
		required("redis", func(context.Context) error {
			if redisDown.Load() {
				return errors.New("dial tcp 127.0.0.1:6379: connection refused")
			}
			return nil
		}),
		degradable("nats", func(context.Context) error {
			if natsDown.Load() {
				return errors.New("nats connection is RECONNECTING")
			}
			return nil
		}),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := admin.Close(context.Background()); err != nil {
			t.Errorf("admin.Close: %v", err)
		}
	})
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + admin.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != `{"status":"ok"}` {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get("/readyz"); code != 200 || body != `{"status":"ready"}` {
		t.Errorf("/readyz with everything up: %d %s", code, body)
	}
	natsDown.Store(true)
	if code, body := get("/readyz"); code != 200 || body != `{"degraded":{"nats":"nats connection is RECONNECTING"},"status":"degraded"}` {
		t.Errorf("/readyz with a degradable check failing: %d %s, want 200 degraded naming nats", code, body)
	}
	redisDown.Store(true)
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"failed":{"redis":"dial tcp`) || strings.Contains(body, "postgres") || !strings.Contains(body, `"degraded":{"nats"`) {
		t.Errorf("/readyz with redis down: %d %s, want 503 naming redis failed and nats degraded", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, `marketdata_dependency_up{dependency="redis"} 0`) || !strings.Contains(body, `marketdata_dependency_up{dependency="postgres"} 1`) {
		t.Errorf("/metrics: marketdata_dependency_up missing or wrong in %s", grepLines(body, "marketdata_dependency_up"))
	}
	if _, body := get("/metrics"); !strings.Contains(body, `marketdata_readyz_status{status="unavailable"} 1`) || !strings.Contains(body, `marketdata_readyz_status{status="ready"} 0`) {
		t.Errorf("/metrics: marketdata_readyz_status missing or wrong in %s", grepLines(body, "marketdata_readyz_status"))
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "marketdata_test_total 3") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d, missing series in %.300s", code, body)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// TestReadyzStatusMetric: marketdata_readyz_status is 1 for the status
// /readyz answers and 0 for the other two, after every evaluation.
func TestReadyzStatusMetric(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	partial := func(context.Context) error { return &partialError{reason: "replica down"} }
	cases := []struct {
		name   string
		checks []check
		want   string
	}{
		{"all pass", []check{required("postgres", ok), degradable("nats", ok)}, statusReady},
		{"a degradable check fails", []check{required("postgres", ok), degradable("nats", down)}, statusDegraded},
		{"a required check partly down", []check{required("redis", partial), degradable("nats", ok)}, statusDegraded},
		{"a required check fails", []check{required("postgres", down), degradable("nats", down)}, statusUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := newReadinessMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			// A stale status from an earlier evaluation must not survive.
			m.status.WithLabelValues(statusReady).Set(1)
			m.status.WithLabelValues(statusUnavailable).Set(1)
			if got := evaluate(context.Background(), c.checks, m).status(); got != c.want {
				t.Errorf("status() = %q, want %q", got, c.want)
			}
			for _, st := range []string{statusReady, statusDegraded, statusUnavailable} {
				want := 0.0
				if st == c.want {
					want = 1
				}
				if got := metrictest.Value(t, reg, "marketdata_readyz_status", "status", st); got != want {
					t.Errorf("marketdata_readyz_status{status=%q} = %v, want %v", st, got, want)
				}
			}
		})
	}
}

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAdminEndpoints: /healthz answers while the process runs, /readyz names
// the dependency that fails, /metrics serves the registry.
func TestAdminEndpoints(t *testing.T) {
	reg := newRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "marketdata_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	var redisDown bool
	admin, err := startAdmin("127.0.0.1:0", reg, []check{
		{"postgres", func(context.Context) error { return nil }},
		{"redis", func(context.Context) error {
			if redisDown {
				return errors.New("dial tcp 127.0.0.1:6379: connection refused")
			}
			return nil
		}},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
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
	redisDown = true
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"redis":"dial tcp`) || strings.Contains(body, "postgres") {
		t.Errorf("/readyz with redis down: %d %s, want 503 naming redis only", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "marketdata_test_total 3") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d, missing series in %.300s", code, body)
	}
}

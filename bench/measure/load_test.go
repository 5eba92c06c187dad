package measure

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoadCountsAnswers: a run counts the answers with the expected status
// (sending the target's headers), and one with none fails naming what came
// back instead.
func TestLoadCountsAnswers(t *testing.T) {
	var unauthorized atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			unauthorized.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/ok" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("ok")) // a failed write shows as the client's error
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	auth := map[string]string{"Authorization": "Bearer k"}
	ctx := context.Background()

	r, err := Load(ctx, Target{Addr: addr, Path: "/ok", Headers: auth, Status: http.StatusOK}, 2, 20*time.Millisecond, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Conns != 2 || r.Requests == 0 || r.RPS <= 0 || r.Errors != 0 || r.Unexpected != 0 {
		t.Errorf("result %+v: want requests counted on 2 connections, no failures", r)
	}
	if r.P50MS > r.P90MS || r.P90MS > r.P99MS || r.P99MS > r.MaxMS {
		t.Errorf("quantiles out of order: %+v", r)
	}
	if n := unauthorized.Load(); n != 0 {
		t.Errorf("%d requests without the target's header", n)
	}

	_, err = Load(ctx, Target{Addr: addr, Path: "/missing", Headers: auth, Status: http.StatusOK}, 1, 0, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no successful request") || strings.Contains(err.Error(), "unexpected status 0") {
		t.Errorf("a run of 404s: %v, want an error counting the unexpected statuses", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Load(cctx, Target{Addr: addr, Path: "/ok", Headers: auth, Status: http.StatusOK}, 1, time.Minute, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled run: %v, want context.Canceled", err)
	}
}

// TestMS: durations in the reports are milliseconds to two decimals, from
// whole microseconds.
func TestMS(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want float64
	}{
		{0, 0},
		{999 * time.Nanosecond, 0},
		{1234567 * time.Nanosecond, 1.23},
		{1236 * time.Microsecond, 1.24},
		{2 * time.Second, 2000},
	} {
		if got := MS(c.d); got != c.want {
			t.Errorf("MS(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}

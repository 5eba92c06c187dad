package ratelimit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/ratelimit"
)

// TestAdmitChargesOnce: after Redis lost its scripts, the retried admission
// charges the window once, not twice.
// SCRIPT FLUSH runs on a private Redis, not the shared one.
func TestAdmitChargesOnce(t *testing.T) {
	rdb, _ := testenv.PrivateRedis(t)
	l := mustNew(t, rdb, ratelimit.Config{Limit: 10, Window: 10 * time.Second, AuthFailLimit: 3, AuthFailWindow: time.Minute,
		Prefix: "t:", Timeout: 2 * time.Second}, func() int { return 1 }, time.Now)
	ctx := context.Background()
	roomInWindow(t, rdb, 10*time.Second, 2*time.Second)
	if _, err := l.Admit(ctx, "192.0.2.1", "acc"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	a, err := l.Admit(ctx, "192.0.2.1", "acc")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.Window.Remaining, 8; got != want || !a.Window.Allowed || a.Window.Degraded {
		t.Errorf("remaining after two admissions, scripts flushed between: got %d (allowed %v, degraded %v), want %d",
			got, a.Window.Allowed, a.Window.Degraded, want)
	}
}

// TestAdmitBlockedRefunds: an admission from a blocked address answers
// blocked and leaves the account's window as it was.
func TestAdmitBlockedRefunds(t *testing.T) {
	l, rdb, _ := newLimiter(t, ratelimit.Config{Limit: 10, Window: 10 * time.Second, AuthFailLimit: 2, AuthFailWindow: time.Minute,
		Timeout: 2 * time.Second})
	ctx := context.Background()
	roomInWindow(t, rdb, 10*time.Second, 2*time.Second)
	for range 2 {
		if _, _, err := l.FailOrBlocked(ctx, "192.0.2.9"); err != nil {
			t.Fatal(err)
		}
	}
	a, err := l.Admit(ctx, "192.0.2.9", "acc")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Blocked || a.BlockedFor <= 0 {
		t.Fatalf("blocked address: got %+v, want blocked with a duration", a)
	}
	b, err := l.Admit(ctx, "192.0.2.10", "acc")
	if err != nil {
		t.Fatal(err)
	}
	if b.Blocked || b.Window.Remaining != 9 {
		t.Errorf("other address, same account: got blocked %v remaining %d, want not blocked and 9 (the blocked request refunded)",
			b.Blocked, b.Window.Remaining)
	}
}

// TestFailOrBlockedExact: many bad requests at once from one address get
// exactly `limit` 401s; the rest are told the address is blocked.
func TestFailOrBlockedExact(t *testing.T) {
	l, _, _ := newLimiter(t, ratelimit.Config{Limit: 10, Window: time.Minute, AuthFailLimit: 5, AuthFailWindow: time.Minute,
		Timeout: 2 * time.Second})
	var mu sync.Mutex
	counted, blocked := 0, 0
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _, err := l.FailOrBlocked(context.Background(), "198.51.100.7")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if b {
				blocked++
			} else {
				counted++
			}
		}()
	}
	wg.Wait()
	if counted != 5 || blocked != 35 {
		t.Errorf("40 concurrent failures with limit 5: %d counted (401), %d blocked (429); want 5 and 35", counted, blocked)
	}
}

// TestAdmitConcurrentExact: admissions of several nodes at once, for two
// accounts from many addresses, share round trips (one window call per
// account per trip) and still accept exactly Limit requests per account in
// a window, each accepted request seeing a distinct Remaining.
func TestAdmitConcurrentExact(t *testing.T) {
	const limit, w, nodes, calls = 60, 10 * time.Second, 3, 600
	first, rdb, prefix := newLimiter(t, ratelimit.Config{Limit: limit, Window: w, AuthFailLimit: 5, AuthFailWindow: time.Minute,
		Timeout: 2 * time.Second})
	limiters := []*ratelimit.Limiter{first}
	for range nodes - 1 {
		limiters = append(limiters, mustNew(t, rdb, ratelimit.Config{Limit: limit, Window: w, AuthFailLimit: 5,
			AuthFailWindow: time.Minute, Prefix: prefix, Timeout: 2 * time.Second}, nil, nil))
	}
	reg := prometheus.NewRegistry()
	if err := first.Register(reg); err != nil {
		t.Fatal(err)
	}
	roomInWindow(t, rdb, w, 3*time.Second)
	accounts := []string{"acc_a", "acc_b"}
	var mu sync.Mutex
	remaining := map[string][]int{}
	refused := map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			<-start
			acc := accounts[i%2]
			a, err := limiters[i%nodes].Admit(context.Background(), fmt.Sprintf("192.0.2.%d", i%7), acc)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil || a.Blocked || a.Window.Degraded:
				t.Errorf("call %d: got %+v, %v; want a Redis decision", i, a, err)
			case a.Window.Allowed:
				remaining[acc] = append(remaining[acc], a.Window.Remaining)
			default:
				if a.Window.Remaining != 0 || a.Window.RetryAfter <= 0 {
					t.Errorf("call %d refused with Remaining %d, RetryAfter %v; want 0 and a wait", i, a.Window.Remaining, a.Window.RetryAfter)
				}
				refused[acc]++
			}
		})
	}
	close(start)
	wg.Wait()
	want := make([]int, limit)
	for i := range want {
		want[i] = i
	}
	for _, acc := range accounts {
		got := remaining[acc]
		slices.Sort(got)
		if !slices.Equal(got, want) || refused[acc] != calls/2-limit {
			t.Errorf("%s: %d accepted with Remaining %v and %d refused; want %d accepted with Remaining 0..%d once each",
				acc, len(got), got, refused[acc], limit, limit-1)
		}
	}
	// The first node's share went out in fewer round trips than requests
	// (600 goroutines released at once: they queue faster than Redis
	// answers), with one window call per account per trip.
	c := counters(t, reg)
	trips, admitted, wcalls := c["marketdata_ratelimit_round_trips_total"], c["marketdata_ratelimit_admissions_total"], c["marketdata_ratelimit_window_calls_total"]
	if admitted != calls/nodes || trips >= admitted || wcalls > 2*trips || wcalls >= admitted {
		t.Errorf("node 1: %v admissions in %v round trips with %v window calls; want %d admissions sharing round trips, ≤ 2 window calls a trip",
			admitted, trips, wcalls, calls/nodes)
	}
	t.Logf("node 1: %v admissions, %v round trips, %v window calls", admitted, trips, wcalls)
}

// TestAdmitBlockedBatchRefunds: many admissions at once from a blocked
// address share round trips with good ones of the same account; the blocked
// ones are all refused as blocked and none stays counted.
func TestAdmitBlockedBatchRefunds(t *testing.T) {
	const limit = 100
	l, rdb, _ := newLimiter(t, ratelimit.Config{Limit: limit, Window: 10 * time.Second, AuthFailLimit: 2, AuthFailWindow: time.Minute,
		Timeout: 2 * time.Second})
	ctx := context.Background()
	roomInWindow(t, rdb, 10*time.Second, 3*time.Second)
	for range 2 {
		if _, _, err := l.FailOrBlocked(ctx, "192.0.2.66"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	good := 0
	for i := range 60 {
		wg.Go(func() {
			addr := "192.0.2.66"
			if i%3 == 0 {
				addr = "192.0.2.67"
			}
			a, err := l.Admit(ctx, addr, "acc")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case addr == "192.0.2.66" && !a.Blocked:
				t.Errorf("blocked address admitted: %+v", a)
			case addr == "192.0.2.67" && (a.Blocked || !a.Window.Allowed):
				t.Errorf("good address refused: %+v", a)
			case addr == "192.0.2.67":
				good++
			}
		})
	}
	wg.Wait()
	// The places the blocked requests were counted for came back: the
	// window accepts exactly limit - good more.
	more := 0
	for {
		a, err := l.Admit(ctx, "192.0.2.67", "acc")
		if err != nil {
			t.Fatal(err)
		}
		if !a.Window.Allowed {
			break
		}
		more++
	}
	if want := limit - good; more != want {
		t.Errorf("after %d good and 40 blocked admissions: %d more accepted, want %d (blocked ones refunded)", good, more, want)
	}
}

// counters reads the counters of reg by name.
func counters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += m.GetCounter().GetValue()
		}
	}
	return out
}

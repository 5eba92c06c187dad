package ratelimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ratelimit"
)

// TestAdmitChargesOnce: after Redis lost its scripts, the retried admission
// charges the window once, not twice.
func TestAdmitChargesOnce(t *testing.T) {
	l, rdb, _ := newLimiter(t, ratelimit.Config{Limit: 10, Window: 10 * time.Second, AuthFailLimit: 3, AuthFailWindow: time.Minute})
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
	l, rdb, _ := newLimiter(t, ratelimit.Config{Limit: 10, Window: 10 * time.Second, AuthFailLimit: 2, AuthFailWindow: time.Minute})
	ctx := context.Background()
	roomInWindow(t, rdb, 10*time.Second, 2*time.Second)
	for range 2 {
		if err := l.Failed(ctx, "192.0.2.9"); err != nil {
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
	l, _, _ := newLimiter(t, ratelimit.Config{Limit: 10, Window: time.Minute, AuthFailLimit: 5, AuthFailWindow: time.Minute})
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

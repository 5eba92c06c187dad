package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/ratelimit"
)

// These tests need no service: Redis is a port where nothing listens.

// fakeClock is the node clock the fallback judges its windows by.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

// downLimiter returns a limiter whose Redis never answers (nothing listens
// on port 1), so every decision is the node's own.
func downLimiter(t *testing.T, cfg ratelimit.Config, peers int, clock *fakeClock) *ratelimit.Limiter {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	cfg.Timeout = 100 * time.Millisecond
	return mustNew(t, rdb, cfg, func() int { return peers }, clock.Now)
}

// admitDown admits one request of account with Redis down: the decision is
// the node's, degraded, with an error saying so.
func admitDown(t *testing.T, l *ratelimit.Limiter, account string) (ratelimit.Result, error) {
	t.Helper()
	a, err := l.Admit(context.Background(), "192.0.2.200", account)
	if a.Blocked {
		t.Fatalf("Admit(%s): got blocked, want a window decision", account)
	}
	return a.Window, err
}

// TestFallbackAdmitDividesByPeers: with Redis down, a node accepts its share
// of the limit (limit/peers, rounded up, at least 1) per aligned window on
// its clock, answers with an error and a usable degraded Result, and reports
// Remaining on the whole limit's scale.
func TestFallbackAdmitDividesByPeers(t *testing.T) {
	cases := []struct {
		limit, peers, share int
	}{
		{30, 3, 10},
		{10, 3, 4},
		{30, 1, 30},
		{1, 5, 1},
		{7, 0, 7}, // no presence yet counts as this node alone
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("limit=%d,peers=%d", c.limit, c.peers), func(t *testing.T) {
			t.Parallel()
			const w = time.Minute
			clock := &fakeClock{now: time.Date(2025, 6, 1, 12, 0, 10, 0, time.UTC)} // 10s into a window
			l := downLimiter(t, ratelimit.Config{Limit: c.limit, Window: w, AuthFailLimit: 5, AuthFailWindow: w}, c.peers, clock)
			for i := 1; i <= c.share; i++ {
				r, err := admitDown(t, l, "acc_a")
				if err == nil {
					t.Fatalf("request %d: got no error with Redis down", i)
				}
				wantRemaining := max(c.limit-i*max(c.peers, 1), 0)
				if !r.Allowed || !r.Degraded || r.Limit != c.limit || r.Remaining != wantRemaining || r.ResetAfter != 50*time.Second {
					t.Fatalf("request %d: got %+v, want allowed, degraded, Limit %d, Remaining %d, ResetAfter 50s",
						i, r, c.limit, wantRemaining)
				}
			}
			r, err := admitDown(t, l, "acc_a")
			if err == nil || r.Allowed || !r.Degraded || r.Remaining != 0 || r.RetryAfter != 50*time.Second {
				t.Fatalf("request %d: got %+v, %v; want refused, degraded, Remaining 0, RetryAfter 50s, an error",
					c.share+1, r, err)
			}
			if r, _ := admitDown(t, l, "acc_b"); !r.Allowed {
				t.Errorf("another account: got %+v, want allowed", r)
			}
			clock.Advance(50 * time.Second) // the next aligned window
			if r, _ := admitDown(t, l, "acc_a"); !r.Allowed || r.ResetAfter != w {
				t.Errorf("next window: got %+v, want allowed with ResetAfter %v", r, w)
			}
		})
	}
}

// TestFallbackFailuresDivideByPeers: with Redis down, an address is blocked
// after limit/peers failures counted on this node, for one window from its
// first failure; a blocked address's admissions are refused as blocked.
func TestFallbackFailuresDivideByPeers(t *testing.T) {
	t.Parallel()
	const limit, peers, w = 6, 3, 10 * time.Second
	clock := &fakeClock{now: time.Date(2025, 6, 1, 12, 0, 3, 0, time.UTC)}
	l := downLimiter(t, ratelimit.Config{Limit: 100, Window: time.Minute, AuthFailLimit: limit, AuthFailWindow: w}, peers, clock)
	ctx := context.Background()
	const addr = "203.0.113.5"
	for i := 1; i <= limit/peers; i++ {
		blocked, _, err := l.Blocked(ctx, addr)
		if err == nil || blocked {
			t.Fatalf("request %d: got blocked=%v err=%v, want not blocked and an error", i, blocked, err)
		}
		if blocked, _, err := l.FailOrBlocked(ctx, addr); err == nil || blocked {
			t.Fatalf("request %d: FailOrBlocked got blocked=%v err=%v, want counted and an error with Redis down", i, blocked, err)
		}
		clock.Advance(time.Second)
	}
	// The first failure was 2s ago: 8s of the window are left.
	blocked, retry, err := l.Blocked(ctx, addr)
	if err == nil || !blocked || retry != 8*time.Second {
		t.Fatalf("request %d: got blocked=%v retry=%v err=%v, want blocked for 8s and an error", limit/peers+1, blocked, retry, err)
	}
	if blocked, retry, err := l.FailOrBlocked(ctx, addr); err == nil || !blocked || retry != 8*time.Second {
		t.Errorf("FailOrBlocked when blocked: got blocked=%v retry=%v err=%v, want blocked for 8s and an error", blocked, retry, err)
	}
	if a, err := l.Admit(ctx, addr, "acc_a"); err == nil || !a.Blocked || a.BlockedFor != 8*time.Second {
		t.Errorf("Admit from the blocked address: got %+v, %v; want blocked for 8s and an error", a, err)
	}
	if blocked, _, _ := l.Blocked(ctx, "203.0.113.6"); blocked {
		t.Error("another address: got blocked, want not blocked")
	}
	clock.Advance(8 * time.Second)
	if blocked, retry, _ := l.Blocked(ctx, addr); blocked {
		t.Errorf("after the window: got blocked for %v, want not blocked", retry)
	}
}

// TestFallbackWindowsAlignedOnUnixEpoch: the fallback's windows start on
// multiples of the window since the Unix epoch, like the Redis ones, for
// every window length (not only those dividing a day).
func TestFallbackWindowsAlignedOnUnixEpoch(t *testing.T) {
	at := time.Unix(1_700_000_003, 250_000_000).UTC()
	for _, w := range []time.Duration{time.Minute, 7 * time.Second, 13 * time.Second, 1500 * time.Millisecond} {
		t.Run(w.String(), func(t *testing.T) {
			t.Parallel()
			clock := &fakeClock{now: at}
			l := downLimiter(t, ratelimit.Config{Limit: 10, Window: w, AuthFailLimit: 5, AuthFailWindow: w}, 1, clock)
			r, _ := admitDown(t, l, "acc_a")
			want := w - time.Duration(at.UnixNano()%int64(w))
			if !r.Allowed || r.ResetAfter != want {
				t.Errorf("got %+v, want allowed with ResetAfter %v (the window ends at a multiple of %v since the epoch)", r, want, w)
			}
		})
	}
}

package ratelimit_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/ratelimit"
)

// These tests run the scripts on the real Redis (the shared one, each test
// on its own prefix); scripts_unit_test.go runs the same rules on miniredis
// with a clock the test controls.

// baseConfig is a complete config; tests change what they judge. The
// timeout is generous: these tests judge the Redis scripts, not the fallback.
func baseConfig() ratelimit.Config {
	return ratelimit.Config{Limit: 10, Window: 10 * time.Second, AuthFailLimit: 5, AuthFailWindow: time.Minute,
		Timeout: 2 * time.Second}
}

// newLimiter returns a limiter on the test's own Redis prefix.
func newLimiter(t *testing.T, cfg ratelimit.Config) (*ratelimit.Limiter, *redis.Client, string) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	cfg.Prefix = prefix
	return mustNew(t, rdb, cfg, func() int { return 1 }, time.Now), rdb, prefix
}

// mustNew is ratelimit.New for a config the test knows is valid.
func mustNew(t *testing.T, rdb redis.UniversalClient, cfg ratelimit.Config, peers func() int, now func() time.Time) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(rdb, cfg, peers, now)
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	return l
}

// redisNow is the Redis clock, which the scripts judge windows by.
func redisNow(t *testing.T, rdb *redis.Client) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("redis TIME: %v", err)
	}
	return now
}

// roomInWindow waits, if needed, until the current aligned window of length
// w has at least need left on the Redis clock, so a short sequence of calls
// cannot straddle two windows.
func roomInWindow(t *testing.T, rdb *redis.Client, w, need time.Duration) {
	t.Helper()
	ms, wms := redisNow(t, rdb).UnixMilli(), w.Milliseconds()
	// Windows are aligned on multiples of w since the Unix epoch.
	left := time.Duration(wms-ms%wms) * time.Millisecond
	if left < need {
		time.Sleep(left + 5*time.Millisecond) // the window boundary itself is what the test waits for
	}
}

// admitWindow admits one request of account from a never-blocked address
// and returns its window decision, failing on anything but a Redis decision.
func admitWindow(t *testing.T, l *ratelimit.Limiter, account string) ratelimit.Result {
	t.Helper()
	a, err := l.Admit(context.Background(), "192.0.2.200", account)
	if err != nil {
		t.Fatalf("Admit(%s): %v", account, err)
	}
	if a.Blocked || a.Window.Degraded {
		t.Fatalf("Admit(%s): got %+v, want a window decision of Redis", account, a)
	}
	return a.Window
}

// TestAdmitCountsDown: a fresh window accepts exactly Limit requests,
// Remaining counting from Limit-1 down to 0; the next is refused with
// RetryAfter = ResetAfter, within the window.
func TestAdmitCountsDown(t *testing.T) {
	t.Parallel()
	const limit, w = 5, 10 * time.Second
	cfg := baseConfig()
	cfg.Limit, cfg.Window = limit, w
	l, rdb, _ := newLimiter(t, cfg)
	roomInWindow(t, rdb, w, 2*time.Second)
	for i := range limit {
		r := admitWindow(t, l, "acc_a")
		if !r.Allowed || r.Remaining != limit-1-i || r.Limit != limit || r.RetryAfter != 0 {
			t.Fatalf("request %d: got %+v, want allowed with Remaining %d, Limit %d, no RetryAfter", i+1, r, limit-1-i, limit)
		}
		if r.ResetAfter <= 0 || r.ResetAfter > w {
			t.Errorf("request %d: got ResetAfter %v, want within (0, %v]", i+1, r.ResetAfter, w)
		}
	}
	for i := range 3 {
		r := admitWindow(t, l, "acc_a")
		if r.Allowed || r.Remaining != 0 || r.Limit != limit {
			t.Fatalf("request %d: got %+v, want refused with Remaining 0", limit+1+i, r)
		}
		if r.RetryAfter <= 0 || r.RetryAfter != r.ResetAfter || r.ResetAfter > w {
			t.Errorf("request %d: got RetryAfter %v ResetAfter %v, want equal and within (0, %v]", limit+1+i, r.RetryAfter, r.ResetAfter, w)
		}
	}
}

// TestAdmitWindowFrees: after RetryAfter, the next window accepts again.
func TestAdmitWindowFrees(t *testing.T) {
	t.Parallel()
	const limit, w = 2, time.Second
	cfg := baseConfig()
	cfg.Limit, cfg.Window = limit, w
	l, rdb, _ := newLimiter(t, cfg)
	roomInWindow(t, rdb, w, 300*time.Millisecond)
	admitWindow(t, l, "acc_a")
	admitWindow(t, l, "acc_a")
	r := admitWindow(t, l, "acc_a")
	if r.Allowed {
		t.Fatalf("third request: got %+v, want refused", r)
	}
	time.Sleep(r.RetryAfter + 20*time.Millisecond) // the window's end on the Redis clock is the event
	if r := admitWindow(t, l, "acc_a"); !r.Allowed || r.Remaining != limit-1 {
		t.Errorf("after RetryAfter: got %+v, want allowed with Remaining %d", r, limit-1)
	}
}

// TestAdmitAccountsIndependent: one account's exhausted window does not
// touch another's.
func TestAdmitAccountsIndependent(t *testing.T) {
	t.Parallel()
	const limit, w = 3, 10 * time.Second
	cfg := baseConfig()
	cfg.Limit, cfg.Window = limit, w
	l, rdb, _ := newLimiter(t, cfg)
	roomInWindow(t, rdb, w, 2*time.Second)
	for range limit + 1 {
		admitWindow(t, l, "acc_a")
	}
	if r := admitWindow(t, l, "acc_a"); r.Allowed {
		t.Fatalf("acc_a: got %+v, want refused", r)
	}
	for i := range limit {
		if r := admitWindow(t, l, "acc_b"); !r.Allowed || r.Remaining != limit-1-i {
			t.Fatalf("acc_b request %d: got %+v, want allowed with Remaining %d", i+1, r, limit-1-i)
		}
	}
}

// TestKeysAreHashTagged: each decision touches one key (the failed-auth
// block marker only once the limit is reached), hash-tagged by the account
// or the address so it has one slot on Redis Cluster, and the keys expire by
// themselves.
func TestKeysAreHashTagged(t *testing.T) {
	t.Parallel()
	const w, fw = 10 * time.Second, 3 * time.Second
	cfg := baseConfig()
	cfg.Window, cfg.AuthFailWindow = w, fw
	l, rdb, prefix := newLimiter(t, cfg)
	ctx := context.Background()
	admitWindow(t, l, "acc_x")
	if _, _, err := l.FailOrBlocked(ctx, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{prefix + "{af:192.0.2.1}", prefix + "{rl:acc_x}"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys: got %q, want %q", keys, want)
	}
	for _, c := range []struct {
		key string
		max time.Duration
	}{{prefix + "{rl:acc_x}", w}, {prefix + "{af:192.0.2.1}", fw}} {
		ttl, err := rdb.PTTL(ctx, c.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > c.max {
			t.Errorf("%s: got TTL %v, want within (0, %v]", c.key, ttl, c.max)
		}
	}
}

// TestAdmitConcurrentExactOneAccount: limiters of several nodes on one
// Redis, called at once for one account, accept exactly Limit requests of a
// window, and each accepted request sees a distinct Remaining.
func TestAdmitConcurrentExactOneAccount(t *testing.T) {
	t.Parallel()
	const limit, w, nodes, calls = 50, 10 * time.Second, 4, 200
	cfg := baseConfig()
	cfg.Limit, cfg.Window = limit, w
	first, rdb, prefix := newLimiter(t, cfg)
	limiters := []*ratelimit.Limiter{first}
	cfg.Prefix = prefix
	for range nodes - 1 {
		limiters = append(limiters, mustNew(t, rdb, cfg, nil, nil))
	}
	roomInWindow(t, rdb, w, 3*time.Second)
	var mu sync.Mutex
	var remaining []int
	refused := 0
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			<-start
			a, err := limiters[i%nodes].Admit(context.Background(), "192.0.2.200", "acc_c")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil || a.Blocked || a.Window.Degraded:
				t.Errorf("call %d: got %+v, %v; want a Redis decision", i, a, err)
			case a.Window.Allowed:
				remaining = append(remaining, a.Window.Remaining)
			default:
				refused++
			}
		})
	}
	close(start)
	wg.Wait()
	slices.Sort(remaining)
	want := make([]int, limit)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(remaining, want) || refused != calls-limit {
		t.Errorf("got %d accepted with Remaining %v and %d refused; want %d accepted with Remaining 0..%d once each",
			len(remaining), remaining, refused, limit, limit-1)
	}
}

// TestFailOrBlockedBlocksAfterThreshold follows the middleware's order
// (FailOrBlocked on a 401): the first Limit failures are counted, not
// blocked; then the address is blocked for the rest of the window, which
// Blocked (a 403's check) and FailOrBlocked both report; other addresses are
// not; after the window the address is free.
func TestFailOrBlockedBlocksAfterThreshold(t *testing.T) {
	t.Parallel()
	const limit, fw = 3, time.Second
	cfg := baseConfig()
	cfg.AuthFailLimit, cfg.AuthFailWindow = limit, fw
	l, _, _ := newLimiter(t, cfg)
	ctx := context.Background()
	const addr = "198.51.100.7"
	for i := 1; i <= limit; i++ {
		if blocked, retry, err := l.Blocked(ctx, addr); err != nil || blocked || retry != 0 {
			t.Fatalf("request %d: got blocked=%v retry=%v err=%v, want not blocked", i, blocked, retry, err)
		}
		if blocked, retry, err := l.FailOrBlocked(ctx, addr); err != nil || blocked || retry != 0 {
			t.Fatalf("failure %d: got blocked=%v retry=%v err=%v, want counted, not blocked", i, blocked, retry, err)
		}
	}
	blocked, retry, err := l.Blocked(ctx, addr)
	if err != nil || !blocked || retry <= 0 || retry > fw {
		t.Fatalf("request %d: got blocked=%v retry=%v err=%v, want blocked within (0, %v]", limit+1, blocked, retry, err, fw)
	}
	if blocked, retry, err := l.FailOrBlocked(ctx, addr); err != nil || !blocked || retry <= 0 || retry > fw {
		t.Errorf("failure %d: got blocked=%v retry=%v err=%v, want blocked within (0, %v]", limit+1, blocked, retry, err, fw)
	}
	if blocked, _, err := l.Blocked(ctx, "198.51.100.8"); err != nil || blocked {
		t.Errorf("another address: got blocked=%v err=%v, want not blocked", blocked, err)
	}
	time.Sleep(retry + 20*time.Millisecond) // the block's expiry in Redis is the event
	if blocked, retry, err := l.Blocked(ctx, addr); err != nil || blocked {
		t.Errorf("after the window: got blocked=%v retry=%v err=%v, want not blocked", blocked, retry, err)
	}
}

// TestFailOrBlockedWindowStartsAtFirstFailure: later failures do not extend
// the window; the block ends one window after the first failure.
func TestFailOrBlockedWindowStartsAtFirstFailure(t *testing.T) {
	t.Parallel()
	const limit, fw = 2, time.Second
	cfg := baseConfig()
	cfg.AuthFailLimit, cfg.AuthFailWindow = limit, fw
	l, _, _ := newLimiter(t, cfg)
	ctx := context.Background()
	const addr = "2001:db8::7"
	if _, _, err := l.FailOrBlocked(ctx, addr); err != nil {
		t.Fatal(err)
	}
	// Redis stamped the first failure before the call returned: the window
	// ends at most one window after now (a slow round trip on a loaded
	// machine only moves the stamp later, towards now).
	first := time.Now()
	time.Sleep(500 * time.Millisecond) // time passing within the window is what the test judges
	if _, _, err := l.FailOrBlocked(ctx, addr); err != nil {
		t.Fatal(err)
	}
	// Redis reads its clock for the answer after this: at most left remains.
	left := fw - time.Since(first)
	blocked, retry, err := l.Blocked(ctx, addr)
	if err != nil || !blocked {
		t.Fatalf("got blocked=%v err=%v, want blocked", blocked, err)
	}
	if retry > left+10*time.Millisecond {
		t.Errorf("got retry %v, want at most %v (the window started at the first failure)", retry, left)
	}
}

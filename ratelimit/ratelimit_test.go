package ratelimit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/ratelimit"
)

// newLimiter returns a limiter on the test's own Redis prefix. The timeout
// is generous: these tests judge the Redis scripts, not the fallback.
func newLimiter(t *testing.T, cfg ratelimit.Config) (*ratelimit.Limiter, *redis.Client, string) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	cfg.Prefix = prefix
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	return ratelimit.New(rdb, cfg, func() int { return 1 }, time.Now), rdb, prefix
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
		time.Sleep(left + 5*time.Millisecond)
	}
}

func allow(t *testing.T, l *ratelimit.Limiter, account string) ratelimit.Result {
	t.Helper()
	r, err := l.Allow(context.Background(), account)
	if err != nil {
		t.Fatalf("Allow(%s): %v", account, err)
	}
	if r.Degraded {
		t.Fatalf("Allow(%s): got a degraded decision with Redis up", account)
	}
	return r
}

// TestAllowCountsDown: a fresh window accepts exactly Limit requests,
// Remaining counting from Limit-1 down to 0; the next is refused with
// RetryAfter = ResetAfter, within the window.
func TestAllowCountsDown(t *testing.T) {
	t.Parallel()
	const limit, w = 5, 10 * time.Second
	l, rdb, _ := newLimiter(t, ratelimit.Config{Limit: limit, Window: w})
	roomInWindow(t, rdb, w, 2*time.Second)
	for i := range limit {
		r := allow(t, l, "acc_a")
		if !r.Allowed || r.Remaining != limit-1-i || r.Limit != limit || r.RetryAfter != 0 {
			t.Fatalf("request %d: got %+v, want allowed with Remaining %d, Limit %d, no RetryAfter", i+1, r, limit-1-i, limit)
		}
		if r.ResetAfter <= 0 || r.ResetAfter > w {
			t.Errorf("request %d: got ResetAfter %v, want within (0, %v]", i+1, r.ResetAfter, w)
		}
	}
	for i := range 3 {
		r := allow(t, l, "acc_a")
		if r.Allowed || r.Remaining != 0 || r.Limit != limit {
			t.Fatalf("request %d: got %+v, want refused with Remaining 0", limit+1+i, r)
		}
		if r.RetryAfter <= 0 || r.RetryAfter != r.ResetAfter || r.ResetAfter > w {
			t.Errorf("request %d: got RetryAfter %v ResetAfter %v, want equal and within (0, %v]", limit+1+i, r.RetryAfter, r.ResetAfter, w)
		}
	}
}

// TestAllowWindowFrees: after RetryAfter, the next window accepts again.
func TestAllowWindowFrees(t *testing.T) {
	t.Parallel()
	const limit, w = 2, time.Second
	l, rdb, _ := newLimiter(t, ratelimit.Config{Limit: limit, Window: w})
	roomInWindow(t, rdb, w, 300*time.Millisecond)
	allow(t, l, "acc_a")
	allow(t, l, "acc_a")
	r := allow(t, l, "acc_a")
	if r.Allowed {
		t.Fatalf("third request: got %+v, want refused", r)
	}
	time.Sleep(r.RetryAfter + 20*time.Millisecond)
	if r := allow(t, l, "acc_a"); !r.Allowed || r.Remaining != limit-1 {
		t.Errorf("after RetryAfter: got %+v, want allowed with Remaining %d", r, limit-1)
	}
}

// TestAllowAccountsIndependent: one account's exhausted window does not
// touch another's.
func TestAllowAccountsIndependent(t *testing.T) {
	t.Parallel()
	const limit, w = 3, 10 * time.Second
	l, rdb, _ := newLimiter(t, ratelimit.Config{Limit: limit, Window: w})
	roomInWindow(t, rdb, w, 2*time.Second)
	for range limit + 1 {
		allow(t, l, "acc_a")
	}
	if r := allow(t, l, "acc_a"); r.Allowed {
		t.Fatalf("acc_a: got %+v, want refused", r)
	}
	for i := range limit {
		if r := allow(t, l, "acc_b"); !r.Allowed || r.Remaining != limit-1-i {
			t.Fatalf("acc_b request %d: got %+v, want allowed with Remaining %d", i+1, r, limit-1-i)
		}
	}
}

// TestKeysAreHashTagged: each decision touches one key, hash-tagged by the
// account or the address so it has one slot on Redis Cluster, and the keys
// expire by themselves.
func TestKeysAreHashTagged(t *testing.T) {
	t.Parallel()
	const w, fw = 10 * time.Second, 3 * time.Second
	l, rdb, prefix := newLimiter(t, ratelimit.Config{Limit: 10, Window: w, AuthFailLimit: 5, AuthFailWindow: fw})
	ctx := context.Background()
	allow(t, l, "acc_x")
	if err := l.Failed(ctx, "192.0.2.1"); err != nil {
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

// TestAllowConcurrentExact: limiters of several nodes on one Redis, called
// at once, accept exactly Limit requests of a window, and each accepted
// request sees a distinct Remaining.
func TestAllowConcurrentExact(t *testing.T) {
	t.Parallel()
	const limit, w, nodes, calls = 50, 10 * time.Second, 4, 200
	first, rdb, prefix := newLimiter(t, ratelimit.Config{Limit: limit, Window: w})
	limiters := []*ratelimit.Limiter{first}
	for range nodes - 1 {
		limiters = append(limiters, ratelimit.New(rdb, ratelimit.Config{Limit: limit, Window: w, Prefix: prefix, Timeout: 2 * time.Second}, nil, nil))
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
			r, err := limiters[i%nodes].Allow(context.Background(), "acc_c")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil || r.Degraded:
				t.Errorf("call %d: got %+v, %v; want a Redis decision", i, r, err)
			case r.Allowed:
				remaining = append(remaining, r.Remaining)
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

// TestFailedBlocksAfterThreshold follows the middleware's order (Blocked,
// then Failed on a 401): the request that reaches the limit is not blocked
// yet, the next one is, for the rest of the window; other addresses are not.
func TestFailedBlocksAfterThreshold(t *testing.T) {
	t.Parallel()
	const limit, fw = 3, time.Second
	l, _, _ := newLimiter(t, ratelimit.Config{Limit: 10, Window: time.Minute, AuthFailLimit: limit, AuthFailWindow: fw})
	ctx := context.Background()
	const addr = "198.51.100.7"
	for i := 1; i <= limit; i++ {
		blocked, retry, err := l.Blocked(ctx, addr)
		if err != nil || blocked || retry != 0 {
			t.Fatalf("request %d: got blocked=%v retry=%v err=%v, want not blocked", i, blocked, retry, err)
		}
		if err := l.Failed(ctx, addr); err != nil {
			t.Fatalf("request %d: Failed: %v", i, err)
		}
	}
	blocked, retry, err := l.Blocked(ctx, addr)
	if err != nil || !blocked || retry <= 0 || retry > fw {
		t.Fatalf("request %d: got blocked=%v retry=%v err=%v, want blocked within (0, %v]", limit+1, blocked, retry, err, fw)
	}
	if blocked, _, err := l.Blocked(ctx, "198.51.100.8"); err != nil || blocked {
		t.Errorf("another address: got blocked=%v err=%v, want not blocked", blocked, err)
	}
	time.Sleep(retry + 20*time.Millisecond)
	if blocked, retry, err := l.Blocked(ctx, addr); err != nil || blocked {
		t.Errorf("after the window: got blocked=%v retry=%v err=%v, want not blocked", blocked, retry, err)
	}
}

// TestFailedWindowStartsAtFirstFailure: later failures do not extend the
// window; the block ends one window after the first failure.
func TestFailedWindowStartsAtFirstFailure(t *testing.T) {
	t.Parallel()
	const limit, fw = 2, time.Second
	l, _, _ := newLimiter(t, ratelimit.Config{Limit: 10, Window: time.Minute, AuthFailLimit: limit, AuthFailWindow: fw})
	ctx := context.Background()
	const addr = "2001:db8::7"
	first := time.Now()
	if err := l.Failed(ctx, addr); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := l.Failed(ctx, addr); err != nil {
		t.Fatal(err)
	}
	blocked, retry, err := l.Blocked(ctx, addr)
	if err != nil || !blocked {
		t.Fatalf("got blocked=%v err=%v, want blocked", blocked, err)
	}
	if left := fw - time.Since(first); retry > left+10*time.Millisecond {
		t.Errorf("got retry %v, want at most %v (the window started at the first failure)", retry, left)
	}
}

func TestSeconds(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"},
		{0, "1"},
		{time.Nanosecond, "1"},
		{999 * time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{1500 * time.Millisecond, "2"},
		{2 * time.Second, "2"},
		{59*time.Second + time.Millisecond, "60"},
		{5 * time.Minute, "300"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.d), func(t *testing.T) {
			if got := ratelimit.Seconds(c.d); got != c.want {
				t.Errorf("Seconds(%v): got %q, want %q", c.d, got, c.want)
			}
		})
	}
}

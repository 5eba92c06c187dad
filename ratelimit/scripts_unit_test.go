package ratelimit

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// admitOne admits one request and fails on anything but a Redis decision.
func admitOne(t *testing.T, l *Limiter, addr, account string) Admission {
	t.Helper()
	a, err := l.Admit(context.Background(), addr, account)
	if err != nil {
		t.Fatalf("Admit(%s, %s): %v", addr, account, err)
	}
	if a.Window.Degraded {
		t.Fatalf("Admit(%s, %s): got a degraded decision with Redis up", addr, account)
	}
	return a
}

// windowCount is the count the window script keeps for account (0: no key).
func windowCount(t *testing.T, f *fakeRedis, l *Limiter, account string) int {
	t.Helper()
	if !f.Exists(l.accountKey(account)) {
		return 0
	}
	n, err := strconv.Atoi(f.HGet(l.accountKey(account), "n"))
	if err != nil {
		t.Fatalf("window count of %s: %v", account, err)
	}
	// Positions given back are holes, taken again first: not counted.
	holes, err := f.ZMembers(l.holesKey(account))
	if err != nil && f.Exists(l.holesKey(account)) {
		t.Fatalf("holes of %s: %v", account, err)
	}
	return n - len(holes)
}

// TestWindowScriptLimit: a fresh window accepts exactly Limit requests,
// Remaining counting down to 0, ResetAfter the time left in the window on
// the Redis clock; refused requests are not counted, and the key expires
// when the window ends.
func TestWindowScriptLimit(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	cfg.Limit = 5
	l := newUnitLimiter(t, f, cfg)
	const left = 49*time.Second + 750*time.Millisecond
	for i := range 5 {
		a := admitOne(t, l, "192.0.2.1", "acc")
		if w := a.Window; a.Blocked || !w.Allowed || w.Remaining != 4-i || w.Limit != 5 || w.ResetAfter != left || w.RetryAfter != 0 {
			t.Fatalf("request %d: got %+v, want allowed, Remaining %d, Limit 5, ResetAfter %v, no RetryAfter", i+1, a, 4-i, left)
		}
	}
	for i := range 3 {
		a := admitOne(t, l, "192.0.2.1", "acc")
		if w := a.Window; w.Allowed || w.Remaining != 0 || w.RetryAfter != left || w.ResetAfter != left {
			t.Fatalf("request %d: got %+v, want refused, Remaining 0, RetryAfter = ResetAfter = %v", 6+i, a, left)
		}
	}
	if got := windowCount(t, f, l, "acc"); got != 5 {
		t.Errorf("window count: got %d, want 5 (refused requests are not counted)", got)
	}
	if got, want := f.HGet(l.accountKey("acc"), "s"), strconv.FormatInt(windowStart.UnixMilli(), 10); got != want {
		t.Errorf("window start: got %s, want %s (the aligned start on the Redis clock)", got, want)
	}
	if got := f.TTL(l.accountKey("acc")); got != left {
		t.Errorf("key TTL: got %v, want %v (the key expires with its window)", got, left)
	}
}

// TestWindowScriptAlignedOnRedisClock: windows start on multiples of the
// window since the Unix epoch on the Redis clock, for every window length,
// whatever the node's clock says.
func TestWindowScriptAlignedOnRedisClock(t *testing.T) {
	at := time.Unix(1_700_000_003, 250_000_000).UTC()
	for _, w := range []time.Duration{time.Minute, 7 * time.Second, 13 * time.Second, 1500 * time.Millisecond} {
		t.Run(w.String(), func(t *testing.T) {
			f := newFakeRedis(t, at)
			cfg := unitConfig()
			cfg.Window = w
			// The node's clock is an hour off: only the fallback reads it.
			l, err := New(f.rdb, cfg, nil, func() time.Time { return at.Add(time.Hour + 123*time.Millisecond) })
			if err != nil {
				t.Fatal(err)
			}
			a := admitOne(t, l, "192.0.2.1", "acc")
			want := w - time.Duration(at.UnixNano()%int64(w))
			if !a.Window.Allowed || a.Window.ResetAfter != want {
				t.Errorf("got %+v, want allowed with ResetAfter %v (the window ends at a multiple of %v since the epoch)", a.Window, want, w)
			}
			if got, want := f.HGet(l.accountKey("acc"), "s"), strconv.FormatInt(at.Add(want-w).UnixMilli(), 10); got != want {
				t.Errorf("window start: got %s, want %s", got, want)
			}
		})
	}
}

// TestWindowScriptCountsRequestsAtOnce: one call counting k requests counts
// them as k calls in a row: those that fit are accepted, each with its own
// position, the rest refused and not counted; windowResult hands out the
// places in order.
func TestWindowScriptCountsRequestsAtOnce(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	cfg.Limit = 10
	l := newUnitLimiter(t, f, cfg)
	ctx := context.Background()
	for _, c := range []struct {
		k                int
		accepted, before int64
	}{{7, 7, 0}, {5, 3, 7}, {2, 0, 10}} {
		vals, err := windowScript.Run(ctx, f.rdb, l.windowKeys("acc"), l.windowArgs(c.k, 0, false)...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		want := []int64{c.accepted, 0, (49*time.Second + 750*time.Millisecond).Milliseconds(), windowStart.UnixMilli(), 0}
		for p := c.before; p < c.before+c.accepted; p++ {
			want = append(want, p)
		}
		want = append(want, 0) // no lease
		if !slices.Equal(vals, want) {
			t.Fatalf("%d requests at once: got %v, want %v", c.k, vals, want)
		}
		for i := range c.k {
			r := l.windowResult(vals, i)
			wantAllowed := int64(i) < c.accepted
			wantRemaining := int64(0)
			if wantAllowed {
				wantRemaining = int64(cfg.Limit) - c.before - int64(i) - 1
			}
			if r.Allowed != wantAllowed || int64(r.Remaining) != wantRemaining || (r.RetryAfter != 0) == wantAllowed {
				t.Errorf("%d at once, request %d: got %+v, want allowed %v, Remaining %d", c.k, i, r, wantAllowed, wantRemaining)
			}
		}
	}
	if got := windowCount(t, f, l, "acc"); got != 10 {
		t.Errorf("window count: got %d, want 10", got)
	}
}

// TestWindowScriptLease: a lease takes places above the reserve only, after
// the requests'; positions given back are taken again first, lowest first;
// a refusal while a lease is out says how long it may last.
func TestWindowScriptLease(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	cfg.Limit = 40 // reserve 2
	l := newUnitLimiter(t, f, cfg)
	ctx := context.Background()
	long := false
	call := func(k, want int) []int64 {
		t.Helper()
		vals, err := windowScript.Run(ctx, f.rdb, l.windowKeys("acc"), l.windowArgs(k, want, long)...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return vals
	}
	span := func(from, to int64) []int64 {
		var out []int64
		for p := from; p < to; p++ {
			out = append(out, p)
		}
		return out
	}
	pos := func(v []int64) []int64 { return v[5 : len(v)-1] }
	length := func(v []int64) int64 { return v[len(v)-1] }
	// A long lease asked for while half the window stays free is long.
	long = true
	if v := call(2, 10); v[0] != 2 || v[1] != 10 || !slices.Equal(pos(v), span(0, 12)) || length(v) != LongLeaseLength.Milliseconds() {
		t.Fatalf("2 requests and a long lease of 10 out of 40: got %v, want 2 accepted, 10 leased, positions 0..11, for %d ms", v, LongLeaseLength.Milliseconds())
	}
	// One that would leave less than half is granted short.
	if v := call(0, 20); v[1] != 20 || !slices.Equal(pos(v), span(12, 32)) || length(v) != LeaseLength.Milliseconds() {
		t.Fatalf("a long lease of 20 with 28 left: got %v, want 20 leased, positions 12..31, for %d ms", v, LeaseLength.Milliseconds())
	}
	long = false
	f.advance(LongLeaseLength)
	// 8 left, 2 of them the reserve: a lease of 10 gets 6.
	if v := call(0, 10); v[1] != 6 || !slices.Equal(pos(v), span(32, 38)) || length(v) != LeaseLength.Milliseconds() {
		t.Fatalf("a lease of 10 with 8 left: got %v, want 6 leased, positions 32..37", v)
	}
	// Give back 5, 6 and 33 of the leases.
	if err := refundScript.Run(ctx, f.rdb, l.windowKeys("acc"), windowStart.UnixMilli(), cfg.Window.Milliseconds(), 33, 5, 6).Err(); err != nil {
		t.Fatal(err)
	}
	if got := windowCount(t, f, l, "acc"); got != 35 {
		t.Fatalf("window count after giving back 3 of 38: %d, want 35", got)
	}
	if v := call(4, 0); v[0] != 4 || !slices.Equal(pos(v), []int64{5, 6, 33, 38}) || length(v) != 0 {
		t.Fatalf("4 requests: got %v, want the holes 5, 6, 33 first, then 38", v)
	}
	if v := call(3, 0); v[0] != 1 || v[4] != LeaseLength.Milliseconds() || !slices.Equal(pos(v), []int64{39}) {
		t.Fatalf("3 requests with 1 place left and a lease out: got %v, want 1 accepted (39), a wait of %d ms", v, LeaseLength.Milliseconds())
	}
	f.advance(LeaseLength)
	if v := call(1, 0); v[0] != 0 || v[4] != 0 {
		t.Fatalf("refused once the leases ended: got %v, want refused with no wait", v)
	}
}

// TestWindowScriptNextWindow: when the window ends its key expires and the
// next window starts from 0; a count kept for an older window start (a key
// whose expiry was lost) is not carried over either.
func TestWindowScriptNextWindow(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	cfg.Limit = 3
	l := newUnitLimiter(t, f, cfg)
	for range 4 {
		admitOne(t, l, "192.0.2.1", "acc")
	}
	f.advance(49*time.Second + 749*time.Millisecond)
	if a := admitOne(t, l, "192.0.2.1", "acc"); a.Window.Allowed || a.Window.ResetAfter != time.Millisecond {
		t.Fatalf("1ms before the window ends: got %+v, want refused with ResetAfter 1ms", a.Window)
	}
	f.advance(time.Millisecond)
	if f.Exists(l.accountKey("acc")) {
		t.Fatal("the window's key outlived its window")
	}
	if a := admitOne(t, l, "192.0.2.1", "acc"); !a.Window.Allowed || a.Window.Remaining != 2 || a.Window.ResetAfter != time.Minute {
		t.Errorf("next window: got %+v, want allowed, Remaining 2, ResetAfter 1m", a.Window)
	}

	// A key left from an older window, without a TTL.
	old := strconv.FormatInt(f.now.Add(-time.Hour).UnixMilli()/60000*60000, 10)
	f.HSet(l.accountKey("stale"), "s", old, "n", "3")
	if a := admitOne(t, l, "192.0.2.1", "stale"); !a.Window.Allowed || a.Window.Remaining != 2 {
		t.Errorf("after an old window's count: got %+v, want allowed with Remaining 2 (counted from 0)", a.Window)
	}
}

// TestRefundScriptOnlyCurrentWindow: a refund takes back counted requests
// of the window it names while it is the current one; one that arrives
// after its window ended changes nothing (it must not give the next window
// places), and a refund creates no key.
func TestRefundScriptOnlyCurrentWindow(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	l := newUnitLimiter(t, f, cfg)
	ctx := context.Background()
	for range 4 {
		admitOne(t, l, "192.0.2.1", "acc")
	}
	start := windowStart.UnixMilli()
	wms := cfg.Window.Milliseconds()
	if err := refundScript.Run(ctx, f.rdb, l.windowKeys("acc"), start, wms, 2, 3).Err(); err != nil {
		t.Fatal(err)
	}
	if got := windowCount(t, f, l, "acc"); got != 2 {
		t.Fatalf("after refunding 2 of 4: count %d, want 2", got)
	}
	f.advance(time.Minute) // the next window; the key expired
	admitOne(t, l, "192.0.2.1", "acc")
	if err := refundScript.Run(ctx, f.rdb, l.windowKeys("acc"), start, wms, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := windowCount(t, f, l, "acc"); got != 1 {
		t.Errorf("refund naming the previous window: count %d, want 1 (unchanged)", got)
	}
	if err := refundScript.Run(ctx, f.rdb, l.windowKeys("nobody"), start, wms, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if f.Exists(l.accountKey("nobody")) {
		t.Error("a refund of an account without a window created its key")
	}
}

// TestFailOrBlockedCountsThenBlocks: exactly AuthFailLimit failures of an
// address are counted (401); from then on the address is blocked (429)
// until one window after its first failure, without counting more; then it
// starts over.
func TestFailOrBlockedCountsThenBlocks(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig() // 3 failures per 5 minutes
	l := newUnitLimiter(t, f, cfg)
	ctx := context.Background()
	const addr = "198.51.100.7"
	fail := func(step string) (bool, time.Duration) {
		t.Helper()
		blocked, retry, err := l.FailOrBlocked(ctx, addr)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return blocked, retry
	}
	if blocked, _ := fail("failure 1"); blocked {
		t.Fatal("failure 1: blocked")
	}
	f.advance(4 * time.Minute) // later failures do not move the window
	for i := 2; i <= 3; i++ {
		if blocked, retry := fail("failure " + strconv.Itoa(i)); blocked || retry != 0 {
			t.Fatalf("failure %d: got blocked=%v retry=%v, want counted (401)", i, blocked, retry)
		}
	}
	if got := f.TTL(l.blockKey(addr)); got != time.Minute {
		t.Errorf("block marker TTL: got %v, want 1m (the rest of the window from the first failure)", got)
	}
	for i := 4; i <= 6; i++ {
		if blocked, retry := fail("failure " + strconv.Itoa(i)); !blocked || retry != time.Minute {
			t.Fatalf("failure %d: got blocked=%v retry=%v, want blocked for 1m (429)", i, blocked, retry)
		}
	}
	if got, err := f.Get(l.addressKey(addr)); err != nil || got != "3" {
		t.Errorf("failures counted: got %q (%v), want 3 (blocked requests are not counted)", got, err)
	}
	f.advance(30 * time.Second)
	if blocked, retry, err := l.Blocked(ctx, addr); err != nil || !blocked || retry != 30*time.Second {
		t.Errorf("Blocked 30s later: got %v %v %v, want blocked for 30s", blocked, retry, err)
	}
	if blocked, _, err := l.Blocked(ctx, "198.51.100.8"); err != nil || blocked {
		t.Errorf("another address: got blocked=%v err=%v, want not blocked", blocked, err)
	}
	f.advance(30 * time.Second) // the window ends
	if f.Exists(l.addressKey(addr)) || f.Exists(l.blockKey(addr)) {
		t.Error("the failure counter or block marker outlived the window")
	}
	if blocked, _, err := l.Blocked(ctx, addr); err != nil || blocked {
		t.Errorf("after the window: got blocked=%v err=%v, want not blocked", blocked, err)
	}
	if blocked, _ := fail("first failure of a new window"); blocked {
		t.Error("first failure of a new window: blocked")
	}
	if got := f.TTL(l.addressKey(addr)); got != cfg.AuthFailWindow {
		t.Errorf("new failure window: TTL %v, want %v", got, cfg.AuthFailWindow)
	}
}

// TestFailOrBlockedAtomic: many bad requests at once from one address get
// exactly AuthFailLimit 401s; the rest are told the address is blocked.
func TestFailOrBlockedAtomic(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	cfg.AuthFailLimit = 5
	l := newUnitLimiter(t, f, cfg)
	var mu sync.Mutex
	counted, blocked := 0, 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 40 {
		wg.Go(func() {
			<-start
			b, _, err := l.FailOrBlocked(context.Background(), "198.51.100.7")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case b:
				blocked++
			default:
				counted++
			}
		})
	}
	close(start)
	wg.Wait()
	if counted != 5 || blocked != 35 {
		t.Errorf("40 concurrent failures with limit 5: %d counted (401), %d blocked (429); want 5 and 35", counted, blocked)
	}
}

// TestKeysShareTheirHashTag: the keys of one decision share one hash tag
// (one Redis Cluster slot): the address's counter and block marker, which
// one script touches together; each key names its account or address.
func TestKeysShareTheirHashTag(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	cfg.AuthFailLimit = 1
	l := newUnitLimiter(t, f, cfg)
	admitOne(t, l, "192.0.2.1", "acc_x")
	if _, _, err := l.FailOrBlocked(context.Background(), "192.0.2.9"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"u:{rl:acc_x}": "rl:acc_x", "u:{af:192.0.2.9}": "af:192.0.2.9", "u:{af:192.0.2.9}:b": "af:192.0.2.9",
	}
	keys := f.Keys()
	if len(keys) != len(want) {
		t.Fatalf("keys: got %q, want those of %v", keys, want)
	}
	for _, k := range keys {
		if tag, ok := want[k]; !ok || hashTag(k) != tag {
			t.Errorf("key %q: hash tag %q, want %q", k, hashTag(k), tag)
		}
		if f.TTL(k) <= 0 {
			t.Errorf("key %q has no TTL", k)
		}
	}
}

// hashTag is the part of a key Redis Cluster hashes: between the first {
// and the next }, when not empty.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

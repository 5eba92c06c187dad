package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// decide runs reqs as one batch, as a sender does, and waits until every
// request is answered (refunds included).
func decide(l *Limiter, reqs []*admitReq) {
	l.admitBatch(reqs)
	for _, r := range reqs {
		<-r.done
	}
}

// requests builds one admission request per (address, account) pair.
func requests(pairs ...[2]string) []*admitReq {
	var reqs []*admitReq
	for _, p := range pairs {
		reqs = append(reqs, &admitReq{addr: p[0], account: p[1], done: make(chan struct{})})
	}
	return reqs
}

// TestAdmitBatchSeveralAccountsAndAddresses: one round trip decides a batch
// of several accounts and addresses: one window call per account, places
// handed out in batch order to requests from addresses that are not
// blocked, and what the window counted for blocked ones refunded.
func TestAdmitBatchSeveralAccountsAndAddresses(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	cfg.Limit, cfg.AuthFailLimit = 2, 1
	l := newUnitLimiter(t, f, cfg)
	const bad, good, good2 = "192.0.2.66", "192.0.2.1", "192.0.2.2"
	if _, _, err := l.FailOrBlocked(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	admitOne(t, l, good, "acc_a") // acc_a has 1 place left
	type want struct {
		blocked, allowed bool
		remaining        int
	}
	reqs := requests(
		[2]string{bad, "acc_a"}, [2]string{good, "acc_a"}, [2]string{good2, "acc_a"},
		[2]string{good, "acc_b"}, [2]string{bad, "acc_b"}, [2]string{good2, "acc_b"},
		[2]string{bad, "acc_c"},
	)
	wants := []want{
		{true, false, 0}, {false, true, 0}, {false, false, 0},
		{false, true, 1}, {true, false, 0}, {false, true, 0},
		{true, false, 0},
	}
	trips, calls := l.trips.Load(), l.windowCalls.Load()
	decide(l, reqs)
	for i, r := range reqs {
		got := want{r.res.Blocked, r.res.Window.Allowed, r.res.Window.Remaining}
		if r.err != nil || got != wants[i] {
			t.Errorf("request %d (%s, %s): got %+v, %v; want %+v", i, r.addr, r.account, got, r.err, wants[i])
		}
		if r.res.Blocked && r.res.BlockedFor != cfg.AuthFailWindow {
			t.Errorf("request %d: blocked for %v, want %v", i, r.res.BlockedFor, cfg.AuthFailWindow)
		}
	}
	if got := l.trips.Load() - trips; got != 1 {
		t.Errorf("round trips: %d, want 1", got)
	}
	if got := l.windowCalls.Load() - calls; got != 3 {
		t.Errorf("window calls: %d, want 3 (one per account)", got)
	}
	for acc, n := range map[string]int{"acc_a": 2, "acc_b": 2, "acc_c": 0} {
		if got := windowCount(t, f, l, acc); got != n {
			t.Errorf("%s: window count %d, want %d (blocked requests refunded)", acc, got, n)
		}
	}
}

// TestAdmitBlockedRefunded: an admission from a blocked address answers
// blocked and leaves the account's window as it was, before its caller
// hears back.
func TestAdmitBlockedRefunded(t *testing.T) {
	f := newFakeRedis(t, at10s)
	l := newUnitLimiter(t, f, unitConfig())
	ctx := context.Background()
	for range 3 {
		if _, _, err := l.FailOrBlocked(ctx, "192.0.2.9"); err != nil {
			t.Fatal(err)
		}
	}
	if a := admitOne(t, l, "192.0.2.9", "acc"); !a.Blocked || a.BlockedFor != 5*time.Minute {
		t.Fatalf("blocked address: got %+v, want blocked for 5m", a)
	}
	if got := windowCount(t, f, l, "acc"); got != 0 {
		t.Errorf("window count after the blocked admission: %d, want 0", got)
	}
	if a := admitOne(t, l, "192.0.2.10", "acc"); a.Blocked || !a.Window.Allowed || a.Window.Remaining != 9 {
		t.Errorf("other address, same account: got %+v, want allowed with Remaining 9", a)
	}
}

// TestAdmitRerunsLostScript: after Redis lost its scripts (SCRIPT FLUSH), a
// batch over several accounts is decided by running each account's window
// call once more, as EVAL: the same places as if nothing was lost, each
// window charged once.
func TestAdmitRerunsLostScript(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	cfg.Limit = 2
	l := newUnitLimiter(t, f, cfg)
	if err := f.rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	var pairs [][2]string
	for i := range 9 {
		pairs = append(pairs, [2]string{"192.0.2.1", fmt.Sprintf("acc%d", i%3)})
	}
	reqs := requests(pairs...)
	decide(l, reqs)
	for i, r := range reqs {
		place := i / 3 // each account's 0th, 1st, 2nd request
		wantAllowed, wantRemaining := place < 2, max(1-place, 0)
		if r.err != nil || r.res.Window.Allowed != wantAllowed || r.res.Window.Remaining != wantRemaining {
			t.Errorf("request %d (%s): %+v, %v; want allowed %v, remaining %d", i, r.account, r.res.Window, r.err, wantAllowed, wantRemaining)
		}
	}
	for a := range 3 {
		if n := windowCount(t, f, l, fmt.Sprintf("acc%d", a)); n != 2 {
			t.Errorf("acc%d: window count %d, want 2: charged once", a, n)
		}
	}
	if got := l.windowCalls.Load(); got != 6 {
		t.Errorf("window calls: %d, want 6 (3 lost, 3 re-run)", got)
	}

	// Through Admit: the admission after the flush charges the window once.
	admitOne(t, l, "192.0.2.1", "acc_x")
	if err := f.rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if a := admitOne(t, l, "192.0.2.1", "acc_x"); !a.Window.Allowed || a.Window.Remaining != 0 {
		t.Errorf("second admission, scripts flushed between: got %+v, want allowed with Remaining 0", a.Window)
	}
}

// TestAdmitConcurrentSharesRoundTrips: admissions released at once, of two
// accounts from several addresses, share round trips (one window call per
// account per trip) and still accept exactly Limit requests per account,
// each accepted one seeing a distinct Remaining.
func TestAdmitConcurrentSharesRoundTrips(t *testing.T) {
	f := newFakeRedis(t, at10s)
	const limit, calls = 100, 300
	cfg := unitConfig()
	cfg.Limit = limit
	l := newUnitLimiter(t, f, cfg)
	// Loaded, as on a Redis that has served before: a lost script's re-runs
	// are TestAdmitRerunsLostScript's subject.
	if err := windowScript.Load(context.Background(), f.rdb).Err(); err != nil {
		t.Fatal(err)
	}
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
			a, err := l.Admit(context.Background(), fmt.Sprintf("192.0.2.%d", i%7), acc)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil || a.Blocked || a.Window.Degraded:
				t.Errorf("call %d: got %+v, %v; want a Redis decision", i, a, err)
			case a.Window.Allowed:
				remaining[acc] = append(remaining[acc], a.Window.Remaining)
			default:
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
	trips, admitted, wcalls := l.trips.Load(), l.admitted.Load(), l.windowCalls.Load()
	if admitted != calls || trips >= admitted || wcalls > 2*trips {
		t.Errorf("%d admissions in %d round trips with %d window calls; want %d sharing round trips, ≤ 2 window calls a trip",
			admitted, trips, wcalls, calls)
	}
	t.Logf("%d admissions, %d round trips, %d window calls", admitted, trips, wcalls)
}

// TestAdmitFallsBackWhenRedisCloses: once the server is gone, every
// decision is the node's own, degraded and with an error: the window on the
// node's clock, failures counted on the node.
func TestAdmitFallsBackWhenRedisCloses(t *testing.T) {
	f := newFakeRedis(t, at10s)
	cfg := unitConfig()
	cfg.Limit, cfg.AuthFailLimit, cfg.Timeout = 2, 1, 200*time.Millisecond
	node := time.Date(2025, 6, 1, 12, 0, 10, 0, time.UTC)
	l, err := New(f.rdb, cfg, func() int { return 1 }, func() time.Time { return node })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admitOne(t, l, "192.0.2.1", "acc") // Redis's decision
	f.Close()

	for i := range 2 {
		a, err := l.Admit(ctx, "192.0.2.1", "acc")
		if err == nil || a.Blocked || !a.Window.Allowed || !a.Window.Degraded || a.Window.ResetAfter != 50*time.Second {
			t.Fatalf("admission %d, Redis closed: got %+v, %v; want allowed by the node (degraded, ResetAfter 50s) and an error", i+1, a, err)
		}
	}
	if a, err := l.Admit(ctx, "192.0.2.1", "acc"); err == nil || a.Window.Allowed || !a.Window.Degraded || a.Window.RetryAfter != 50*time.Second {
		t.Errorf("third admission, Redis closed: got %+v, %v; want refused by the node's window of 2", a, err)
	}
	if blocked, _, err := l.FailOrBlocked(ctx, "192.0.2.9"); err == nil || blocked {
		t.Errorf("first failure, Redis closed: got blocked=%v err=%v; want counted on the node and an error", blocked, err)
	}
	if blocked, retry, err := l.Blocked(ctx, "192.0.2.9"); err == nil || !blocked || retry != cfg.AuthFailWindow {
		t.Errorf("Blocked after the node's limit, Redis closed: got %v %v %v; want blocked for %v and an error", blocked, retry, err, cfg.AuthFailWindow)
	}
	if a, err := l.Admit(ctx, "192.0.2.9", "acc"); err == nil || !a.Blocked {
		t.Errorf("admission from the blocked address, Redis closed: got %+v, %v; want blocked", a, err)
	}
}

package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
)

// runLimiter starts l's leases and suspects until the test ends, and waits
// until its suspects set is complete (subscribed and scanned).
func runLimiter(t *testing.T, l *Limiter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	awaitSure(t, l, true)
}

func awaitSure(t *testing.T, l *Limiter, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.suspects.sure.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("suspects set complete = %v after 10 s, want %v", !want, want)
		}
		time.Sleep(5 * time.Millisecond) // the subscription runs on its own goroutine: no event to wait on
	}
}

// TestLeasesExactAcrossNodes: two nodes with leases, hammered at once by
// many callers, accept exactly the limit of one window, each accepted
// request with its own RateLimit-Remaining (limit-1 … 0), and most of them
// from leases, with no round trip.
func TestLeasesExactAcrossNodes(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	exactAcrossNodes(t, rdb, prefix, 2000, 16, 2, 2*time.Second)
}

// exactAcrossNodes hammers two limiters with Run on rdb, callers at once,
// until each caller is refused.
func exactAcrossNodes(t *testing.T, rdb redis.UniversalClient, prefix string, limit, callers, n int, timeout time.Duration) {
	t.Helper()
	w := 20 * time.Second
	cfg := Config{Limit: limit, Window: w, AuthFailLimit: 20, AuthFailWindow: time.Minute, Prefix: prefix, Timeout: timeout}
	var nodes []*Limiter
	for range n {
		nodes = append(nodes, mustNewInternal(t, rdb, cfg))
	}
	for _, l := range nodes {
		runLimiter(t, l)
	}
	roomInWindowOf(t, rdb, w, 10*time.Second)
	var mu sync.Mutex
	var remaining []int
	refused := 0
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			l := nodes[g%len(nodes)]
			for {
				a, err := l.Admit(context.Background(), "192.0.2.1", "acc")
				if err != nil {
					t.Errorf("Admit: %v", err)
					return
				}
				mu.Lock()
				if !a.Window.Allowed {
					refused++
					mu.Unlock()
					return
				}
				remaining = append(remaining, a.Window.Remaining)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(remaining)
	for i, r := range remaining {
		if r != i {
			t.Fatalf("accepted %d requests; RateLimit-Remaining %d at %d of the sorted list, want each of 0..%d once", len(remaining), r, i, limit-1)
		}
	}
	if len(remaining) != limit || refused != callers {
		t.Fatalf("accepted %d, refused %d; want %d and %d", len(remaining), refused, limit, callers)
	}
	var leased, trips uint64
	for _, l := range nodes {
		leased += l.leased.Load()
		trips += l.trips.Load()
	}
	if leased < uint64(limit/2) {
		t.Errorf("%d of %d admissions came from leases (%d round trips), want most", leased, limit, trips)
	}
	t.Logf("%d admissions: %d from leases, %d round trips", limit, leased, trips)
}

// roomInWindowOf is roomInWindow on any client.
func roomInWindowOf(t *testing.T, rdb redis.UniversalClient, w, need time.Duration) {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms, wms := now.UnixMilli(), w.Milliseconds()
	if left := time.Duration(wms-ms%wms) * time.Millisecond; left < need {
		time.Sleep(left + 5*time.Millisecond) // the window boundary itself is what the test waits for
	}
}

// TestLeaseGivenBackBeforeRefusal: places one node leased and did not use
// go back when its lease ends, and another node that ran out of places
// meanwhile waits for them instead of refusing: together the nodes still
// accept exactly the limit.
func TestLeaseGivenBackBeforeRefusal(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	const limit = 100
	w := 20 * time.Second
	cfg := Config{Limit: limit, Window: w, AuthFailLimit: 20, AuthFailWindow: time.Minute, Prefix: prefix, Timeout: 2 * time.Second}
	a, b := mustNewInternal(t, rdb, cfg), mustNewInternal(t, rdb, cfg)
	runLimiter(t, a) // b decides every request in Redis
	roomInWindow(t, rdb, w, 10*time.Second)
	ctx := context.Background()
	// Concurrent requests on a, until it holds a lease with places left.
	accepted, granted := 0, false
	for !granted && accepted < 160 {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if adm, err := a.Admit(ctx, "192.0.2.1", "acc"); err != nil || !adm.Window.Allowed {
					t.Errorf("Admit on a: %+v, %v", adm, err)
				}
			})
		}
		wg.Wait()
		accepted += 8
		a.leases.mu.Lock()
		granted = len(a.leases.m["acc"].pos) > 0
		a.leases.mu.Unlock()
	}
	if !granted {
		t.Fatalf("node a was granted no lease after %d requests", accepted)
	}
	for {
		adm, err := b.Admit(ctx, "192.0.2.1", "acc")
		if err != nil {
			t.Fatal(err)
		}
		if !adm.Window.Allowed {
			break
		}
		accepted++
	}
	if accepted != limit {
		t.Fatalf("accepted %d across the nodes, want exactly %d: the lease's unused places did not come back before the refusal", accepted, limit)
	}
	holes, err := rdb.ZCard(ctx, a.holesKey("acc")).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	if holes != 0 {
		t.Errorf("%d places given back were never taken again", holes)
	}
}

// TestSuspectsBlockAcrossNodes: an address whose failures another node
// counts is checked by this one as soon as its first failure is published,
// so the request after the one that reached the limit is blocked on every
// node; an address that never failed is admitted from a lease with no
// round trip; a lost subscription makes the node check every address until
// it is back and has read the counters again.
func TestSuspectsBlockAcrossNodes(t *testing.T) {
	// CLIENT KILL below would cut other tests' subscriptions on a shared Redis.
	rdb, _ := testenv.PrivateRedis(t)
	prefix := "t:"
	cfg := Config{Limit: 100000, Window: time.Minute, AuthFailLimit: 5, AuthFailWindow: time.Minute, Prefix: prefix, Timeout: 2 * time.Second}
	a, b := mustNewInternal(t, rdb, cfg), mustNewInternal(t, rdb, cfg)
	runWithLateHearer(t, a, b)
	ctx := context.Background()
	const bad, good = "198.51.100.7", "192.0.2.1"
	failToLimitConfirmed(t, a, b, bad)
	for range 20 {
		adm, err := b.Admit(ctx, bad, "acc")
		if err != nil || !adm.Blocked {
			t.Fatalf("a good key from the blocked address on node b: %+v, %v; want blocked", adm, err)
		}
		if adm, err := b.Admit(ctx, good, "acc"); err != nil || adm.Blocked || !adm.Window.Allowed {
			t.Fatalf("an address that never failed, on node b: %+v, %v; want admitted", adm, err)
		}
	}
	if b.leased.Load() == 0 {
		t.Error("no admission of the clean address came from a lease")
	}

	// A node whose subscription is lost checks every address until it is back.
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	awaitSure(t, b, false)
	awaitSure(t, b, true)
	if b.suspects.clear(bad, time.Now()) {
		t.Error("after resubscribing, node b forgot the suspect address (its counter was not read again)")
	}
	if adm, err := b.Admit(ctx, bad, "acc"); err != nil || !adm.Blocked {
		t.Fatalf("after resubscribing, the blocked address on node b: %+v, %v; want blocked", adm, err)
	}
}

// runWithLateHearer runs a and b, b hearing each publication 100 ms late
// (as a node on a saturated machine may: longer than a's remaining failures
// take), until both sets of suspects are complete.
func runWithLateHearer(t *testing.T, a, b *Limiter) {
	t.Helper()
	b.hearDelay = 100 * time.Millisecond
	runLimiter(t, a)
	runLimiter(t, b)
	awaitSure(t, a, true)
	awaitSure(t, b, true)
}

// failToLimitConfirmed counts a's limit of failures of addr on a, and
// checks that the one that reached it was answered once b had heard of addr
// (b checks it from the very next request on), not after the wait's bound.
func failToLimitConfirmed(t *testing.T, a, b *Limiter, addr string) {
	t.Helper()
	for i := range a.cfg.AuthFailLimit {
		if blocked, _, err := a.FailOrBlocked(context.Background(), addr); err != nil || blocked {
			t.Fatalf("failure %d: blocked %v, %v; want counted", i+1, blocked, err)
		}
	}
	if b.suspects.clear(addr, time.Now()) {
		t.Fatal("the failure that reached the limit was answered before node b heard of the address")
	}
	if n := a.unconfirmed.Load(); n != 0 {
		t.Errorf("%d blocks answered unconfirmed, want 0", n)
	}
}

// TestParseSuspect: publications that are not "<ms> <address>" are ignored.
func TestParseSuspect(t *testing.T) {
	for _, c := range []struct {
		in   string
		addr string
		ok   bool
	}{
		{"300000 192.0.2.1", "192.0.2.1", true},
		{"5 2001:db8::1", "2001:db8::1", true},
		{"0 192.0.2.1", "", false},
		{"-5 192.0.2.1", "", false},
		{"x 192.0.2.1", "", false},
		{"300000", "", false},
		{"300000 ", "", false},
		{"", "", false},
	} {
		addr, _, ok := parseSuspect(c.in)
		if ok != c.ok || addr != c.addr {
			t.Errorf("parseSuspect(%q) = %q, %v; want %q, %v", c.in, addr, ok, c.addr, c.ok)
		}
	}
}

// TestLongLeasePolicy: an account that sends a node too few requests for a
// short lease asks for a long one, sized to what it sent in the last
// LongLeaseLength (the window script decides whether it is long); an
// account that sends many asks for short leases as before; rates fall to 0
// after a silence; windows under 2 s get no long leases.
func TestLongLeasePolicy(t *testing.T) {
	ls := newLeases(1000, time.Minute)
	now := time.Unix(1_000_000, 0)
	slow := func(n int) { // n requests, 300 ms apart
		for range n {
			now = now.Add(300 * time.Millisecond)
			ls.take("slow", true, now)
		}
	}
	slow(1)
	if n, _ := ls.want("slow", now); n != 0 {
		t.Fatalf("a first request asks for a lease of %d, want none", n)
	}
	slow(8) // 2.4 s: the last LongLeaseLength held 7
	n, long := ls.want("slow", now)
	if n < longLeaseMinRate || !long {
		t.Fatalf("a slow account asks for %d places (long %v), want at least %d, long", n, long, longLeaseMinRate)
	}
	// Granted: it hands out its places until the lease ends, then asks again.
	ls.grant("slow", 0, 60_000, []int64{11, 12, 13}, 60_000, now, now, LongLeaseLength)
	for _, want := range []int{1000 - 1 - 11, 1000 - 1 - 12} {
		now = now.Add(300 * time.Millisecond)
		res, ok := ls.take("slow", true, now)
		if !ok || res.Remaining != want {
			t.Fatalf("take from the lease: %v %+v, want Remaining %d", ok, res, want)
		}
	}
	if n, _ := ls.want("slow", now); n != 0 {
		t.Fatalf("asks for %d more while the lease holds places", n)
	}
	now = now.Add(LongLeaseLength)
	if _, ok := ls.take("slow", true, now); ok {
		t.Fatal("a place was handed out after the lease ended")
	}
	if back := ls.sweep(now, false); len(back) != 1 || !slices.Equal(back[0].pos, []int64{13}) {
		t.Fatalf("the ended lease gave back %+v, want place 13", back)
	}
	// A busy account: 10 requests within 100 ms get a short lease.
	for i := range 10 {
		ls.take("busy", true, now.Add(time.Duration(i)*5*time.Millisecond))
	}
	if n, long := ls.want("busy", now.Add(50*time.Millisecond)); n != 10 || long {
		t.Fatalf("a busy account asks for %d places (long %v), want 10, short", n, long)
	}
	// After a silence both rates fall to 0: no lease for one request.
	now = now.Add(3 * LongLeaseLength)
	ls.take("busy", true, now)
	ls.take("slow", true, now)
	for _, a := range []string{"busy", "slow"} {
		if n, _ := ls.want(a, now); n != 0 {
			t.Fatalf("%s: after %v of silence a lease of %d was asked, want none", a, 3*LongLeaseLength, n)
		}
	}
	// A 2 s window has no long leases.
	short := newLeases(1000, 2*time.Second)
	for i := range 5 {
		short.take("slow", true, now.Add(time.Duration(i)*300*time.Millisecond))
	}
	if n, long := short.want("slow", now.Add(1500*time.Millisecond)); n != 0 || long {
		t.Fatalf("in a 2 s window a slow account asks for %d places (long %v), want none", n, long)
	}
}

// TestSlowPollersAdmittedFromLongLeases: accounts that each send a node a
// few requests a second (pollers) are admitted mostly from long leases on
// a real Redis, and when another node then drains the window, the places
// those leases hold come back: the nodes together accept exactly the limit.
func TestSlowPollersAdmittedFromLongLeases(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	const limit, accounts = 400, 20
	w := time.Minute
	cfg := Config{Limit: limit, Window: w, AuthFailLimit: 20, AuthFailWindow: time.Minute, Prefix: prefix, Timeout: 2 * time.Second}
	a, b := mustNewInternal(t, rdb, cfg), mustNewInternal(t, rdb, cfg)
	runLimiter(t, a)
	roomInWindow(t, rdb, w, 10*time.Second)
	ctx := context.Background()
	accepted := map[string]int{}
	// Each account polls a every 100 ms for 3 s: 30 requests, 4 a second
	// is under leaseMinRate a LeaseLength.
	for range 30 {
		for i := range accounts {
			acc := fmt.Sprintf("acc%d", i)
			adm, err := a.Admit(ctx, "192.0.2.1", acc)
			if err != nil || !adm.Window.Allowed {
				t.Fatalf("Admit %s on a: %+v, %v", acc, adm, err)
			}
			accepted[acc]++
		}
		time.Sleep(100 * time.Millisecond) // the pollers' pace is what the test is about
	}
	total := uint64(30 * accounts)
	if leased := a.leased.Load(); leased < total/2 {
		t.Errorf("%d of %d admissions came from leases (%d round trips), want most", leased, total, a.trips.Load())
	}
	t.Logf("%d admissions: %d from leases, %d round trips", total, a.leased.Load(), a.trips.Load())
	// b drains acc0's window while a still holds its lease: it gets every
	// place left, a's unused ones included once they come back.
	for {
		adm, err := b.Admit(ctx, "192.0.2.1", "acc0")
		if err != nil {
			t.Fatal(err)
		}
		if !adm.Window.Allowed {
			break
		}
		accepted["acc0"]++
	}
	if accepted["acc0"] != limit {
		t.Fatalf("accepted %d for acc0 across the nodes, want exactly %d", accepted["acc0"], limit)
	}
}

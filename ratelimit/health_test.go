package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
)

// slowRedisNodes starts a private Redis (the tests stop its process) and
// two limiters on it, each with a client opened as the binary opens it, with
// the binary's budgets: 50 ms while Redis is down, slowWait while it
// answers. With run set they run (leases, the probe) as the binary's do.
func slowRedisNodes(t *testing.T, limit int, slowWait time.Duration, run bool) (*testenv.RedisServer, []*Limiter) {
	t.Helper()
	srv := testenv.StartRedis(t)
	var nodes []*Limiter
	for range 2 {
		rdb, err := redisx.Open(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		l, err := New(rdb, Config{Limit: limit, Window: time.Minute, AuthFailLimit: 20, AuthFailWindow: time.Minute,
			Prefix: "slow:", Timeout: DefaultTimeout, SlowWait: slowWait}, func() int { return 2 }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if run {
			runLimiter(t, l)
		}
		nodes = append(nodes, l)
	}
	return srv, nodes
}

// TestSlowRedisIsNotDown: Redis stopped for 300 ms (up, but not given a
// core: a saturated machine) while two nodes admit 40 requests of one
// account whose limit is 10. Every request waits for Redis and is decided
// there: none decided alone, exactly 10 accepted across the nodes, and
// Redis never counted down. With the old 50 ms budget the requests queued
// behind the stopped round trips were decided by each node on its share
// (5 of a fresh window each), on top of what Redis had counted. The nodes
// do not run, so no lease is out: TestSlowRedisLeaseGivenBack has those.
func TestSlowRedisIsNotDown(t *testing.T) {
	const limit, requests = 10, 40
	srv, nodes := slowRedisNodes(t, limit, DefaultSlowWait, false)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	roomInWindow(t, rdb, time.Minute, 5*time.Second)

	srv.Pause()
	resumed := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond)
		srv.Resume()
		close(resumed)
	}()
	t.Cleanup(func() { <-resumed })
	var (
		mu              sync.Mutex
		accepted, alone int
		errs            []error
		wg              sync.WaitGroup
	)
	for i := range requests {
		wg.Go(func() {
			a, err := nodes[i%2].Admit(ctx, "192.0.2.10", "acc")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if a.Window.Degraded {
				alone++
			}
			if a.Window.Allowed {
				accepted++
			}
		})
	}
	wg.Wait()
	if alone > 0 || len(errs) > 0 {
		t.Errorf("Redis stopped for 300 ms: %d of %d admissions decided alone (first error: %v); want every one decided by Redis", alone, requests, errors.Join(errs...))
	}
	if accepted != limit {
		t.Errorf("Redis stopped for 300 ms: %d of %d requests accepted across the nodes, want exactly the limit %d", accepted, requests, limit)
	}
	for i, l := range nodes {
		if n := l.downs.Load(); n > 0 || l.alone.Load() > 0 {
			t.Errorf("node %d counted Redis down %d times and decided %d times alone; want neither", i, n, l.alone.Load())
		}
	}
}

// TestHungRedisCountsDown: Redis stopped for good. The first calls wait
// for it (up to the client's read timeout), then Redis counts as down, and
// every admission after that is decided by the node within the 50 ms
// budget (far less than the slow wait, which is 3 s here to tell the two
// apart on a busy machine); once Redis runs again the probe counts it up
// and admissions are Redis's again.
func TestHungRedisCountsDown(t *testing.T) {
	const slowWait = 3 * time.Second
	srv, nodes := slowRedisNodes(t, 1000, slowWait, true)
	l := nodes[0]
	ctx := context.Background()
	if a, err := l.Admit(ctx, "192.0.2.20", "acc"); err != nil || a.Window.Degraded {
		t.Fatalf("admission with Redis up: %+v, %v; want Redis's decision", a, err)
	}

	srv.Pause()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume()
		}
	})
	go l.Admit(ctx, "192.0.2.20", "acc") //nolint:errcheck // it only has to find Redis silent
	deadline := time.Now().Add(15 * time.Second)
	for !l.down.Load() {
		if time.Now().After(deadline) {
			t.Fatal("Redis stopped: the limiter did not count it down within 15 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 5 {
		start := time.Now()
		a, err := l.Admit(ctx, "192.0.2.20", "acc")
		took := time.Since(start)
		if err == nil || !a.Window.Degraded || !a.Window.Allowed {
			t.Errorf("admission %d with Redis counted down: %+v, %v; want the node's own decision (allowed, degraded) and an error", i, a, err)
		}
		if took >= slowWait/2 {
			t.Errorf("admission %d with Redis counted down took %v; want about the 50 ms budget, far under the %v slow wait", i, took, slowWait)
		}
	}

	srv.Resume()
	resumed = true
	deadline = time.Now().Add(15 * time.Second)
	for l.down.Load() {
		if time.Now().After(deadline) {
			t.Fatal("Redis running again: the limiter did not count it up within 15 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a, err := l.Admit(ctx, "192.0.2.20", "acc"); err != nil || a.Window.Degraded {
		t.Errorf("admission with Redis up again: %+v, %v; want Redis's decision", a, err)
	}
	if l.downs.Load() == 0 || l.alone.Load() < 5 {
		t.Errorf("counters: %d downs, %d decided alone; want at least 1 and 5", l.downs.Load(), l.alone.Load())
	}
}

// TestUnreached: only a missing reply counts Redis down; an error reply is
// an answer.
func TestUnreached(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{redis.Nil, false},
		{redis.ErrNoScript, false},
		{context.DeadlineExceeded, true},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true},
	} {
		if got := unreached(c.err); got != c.want {
			t.Errorf("unreached(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestBurstExactAcrossRunningNodes: bursts of 40 concurrent requests of
// one account (limit 10) on two running nodes accept exactly 10 each time.
// The two senders of a node may send one account's requests in two round
// trips at once; one of them can take a lease while the other's requests
// are refused. A refused request's second try now takes a place of its own
// node's lease before it answers: before, such a burst accepted 7–9.
func TestBurstExactAcrossRunningNodes(t *testing.T) {
	const limit, requests, bursts = 10, 40, 12
	srv, nodes := slowRedisNodes(t, limit, DefaultSlowWait, true)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	for b := range bursts {
		roomInWindow(t, rdb, time.Minute, 5*time.Second)
		account := fmt.Sprintf("burst%d", b)
		var accepted atomic.Int64
		var wg sync.WaitGroup
		for i := range requests {
			wg.Go(func() {
				a, err := nodes[i%2].Admit(context.Background(), "192.0.2.30", account)
				if err != nil {
					t.Errorf("burst %d: admission: %v", b, err)
				}
				if a.Window.Allowed {
					accepted.Add(1)
				}
			})
		}
		wg.Wait()
		if n := accepted.Load(); n != limit {
			t.Errorf("burst %d: %d of %d requests accepted across the nodes, want exactly the limit %d", b, n, requests, limit)
		}
	}
}

// TestSlowRedisLeaseGivenBack: a lease whose round trip outlasted it (Redis
// stopped for 300 ms, a lease is 100 ms) gives its places back as soon as
// its answer comes, with no sweep: Redis holds them as holes at once.
func TestSlowRedisLeaseGivenBack(t *testing.T) {
	// A limit of 10: the lease leaves under half the window free, so it is
	// a short one (100 ms), not a long one.
	srv, nodes := slowRedisNodes(t, 10, DefaultSlowWait, false)
	l := nodes[0]
	l.running.Store(true) // leases asked for and granted, but no sweep runs
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	roomInWindow(t, rdb, time.Minute, 5*time.Second)
	now := time.Now()
	for range 8 {
		l.leases.take("acc", false, now) // a busy account: it asks for a lease
	}
	srv.Pause()
	time.AfterFunc(300*time.Millisecond, srv.Resume)
	req := &admitReq{addr: "192.0.2.40", account: "acc", done: make(chan struct{})}
	l.admitBatch([]*admitReq{req})
	if req.err != nil || !req.res.Window.Allowed {
		t.Fatalf("admission: %+v, %v; want allowed by Redis", req.res, req.err)
	}
	l.leases.mu.Lock()
	held := len(l.leases.m["acc"].pos)
	l.leases.mu.Unlock()
	// The refund goes out beside the answer (no sweep runs here): wait for it.
	var holes int64
	for deadline := time.Now().Add(5 * time.Second); holes == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var err error
		if holes, err = rdb.ZCard(context.Background(), "slow:{rl:acc}:h").Result(); err != nil {
			t.Fatal(err)
		}
	}
	if held != 0 || holes == 0 {
		t.Errorf("a lease that ended before its answer came: node holds %d places, Redis %d holes within 5 s; want 0 held and its places as holes", held, holes)
	}
}

// TestLateReplyCountsDown: a reply later than the slow wait still decides
// its request (go-redis waits for it up to the read timeout), but counts
// Redis down; without Run, the next call answered in time counts it up.
func TestLateReplyCountsDown(t *testing.T) {
	srv, nodes := slowRedisNodes(t, 1000, 300*time.Millisecond, false)
	l := nodes[0]
	ctx := context.Background()
	if a, err := l.Admit(ctx, "192.0.2.50", "acc"); err != nil || a.Window.Degraded {
		t.Fatalf("admission with Redis up: %+v, %v; want Redis's decision", a, err)
	}
	srv.Pause()
	time.AfterFunc(800*time.Millisecond, srv.Resume)
	// Sent at once (nothing queued), answered after 800 ms.
	a, err := l.Admit(ctx, "192.0.2.50", "acc")
	if err != nil || a.Window.Degraded || !a.Window.Allowed {
		t.Errorf("admission answered after 800 ms: %+v, %v; want Redis's decision", a, err)
	}
	if !l.down.Load() || l.downs.Load() != 1 {
		t.Errorf("after a reply 800 ms late (slow wait 300 ms): down %v, %d downs; want counted down once", l.down.Load(), l.downs.Load())
	}
	if a, err := l.Admit(ctx, "192.0.2.50", "acc"); err != nil || a.Window.Degraded {
		t.Errorf("admission with Redis answering again: %+v, %v; want Redis's decision", a, err)
	}
	if l.down.Load() {
		t.Error("a call answered in time did not count Redis up (no probe runs)")
	}
}

// TestStreamSlotsFollowHealth: stream slots that follow a limiter's view of
// Redis. Redis stopped: the open that finds it silent (the client's read
// timeout) counts it down, and the opens after it are decided
// by the node at once, where each waited the read timeout before; once
// Redis runs again and the probe counts it up, opens are Redis's again.
func TestStreamSlotsFollowHealth(t *testing.T) {
	srv, nodes := slowRedisNodes(t, 1000, DefaultSlowWait, true)
	l := nodes[0]
	rdb, err := redisx.Open(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	slots, err := NewStreams(rdb, StreamsConfig{Limit: 5, Lease: 15 * time.Second, Prefix: "slow:", Timeout: DefaultTimeout}, func() int { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	slots.FollowHealth(l)
	ctx := context.Background()
	if ok, _, err := slots.Open(ctx, "acc", "s1"); !ok || err != nil {
		t.Fatalf("open with Redis up: %v, %v; want Redis's yes", ok, err)
	}

	srv.Pause()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume()
		}
	})
	if _, _, err := slots.Open(ctx, "acc", "s2"); err == nil {
		t.Error("open with Redis stopped: no error; want the node's own decision")
	}
	if !l.down.Load() {
		t.Fatal("an open that found Redis silent did not count it down")
	}
	start := time.Now()
	ok, _, err := slots.Open(ctx, "acc", "s3")
	if took := time.Since(start); !ok || !errors.Is(err, errRedisDown) || took > 500*time.Millisecond {
		t.Errorf("open with Redis counted down: %v, %v in %v; want the node's yes at once (errRedisDown)", ok, err, took)
	}

	srv.Resume()
	resumed = true
	for deadline := time.Now().Add(15 * time.Second); l.down.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Redis running again: not counted up within 15 s")
		}
	}
	if ok, _, err := slots.Open(ctx, "acc", "s4"); !ok || err != nil {
		t.Errorf("open with Redis up again: %v, %v; want Redis's yes", ok, err)
	}
}

// downLimiter is a running limiter whose own Redis is a closed port: it
// counts Redis down at its first call, as when one master of a Redis
// Cluster is down, while the stream slots' Redis keeps answering.
func downLimiter(t *testing.T) *Limiter {
	t.Helper()
	dead := redis.NewClient(&redis.Options{Addr: testenv.ClosedPort(t), MaxRetries: -1})
	t.Cleanup(func() { dead.Close() })
	l, err := New(dead, Config{Limit: 10, Window: time.Minute, AuthFailLimit: 20, AuthFailWindow: time.Minute,
		Prefix: "x:", Timeout: DefaultTimeout, SlowWait: DefaultSlowWait}, func() int { return 2 }, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for !l.running.Load() {
		time.Sleep(time.Millisecond)
	}
	l.Blocked(context.Background(), "192.0.2.1") //nolint:errcheck // it only has to find Redis gone
	if !l.decideAlone() {
		t.Fatal("a limiter whose Redis is a closed port did not count it down")
	}
	return l
}

// slotNodes are two nodes' stream slots on one private Redis (limit and
// lease as given); the first follows a limiter that counts Redis down.
func slotNodes(t *testing.T, limit int, lease time.Duration) (a, b *Streams) {
	t.Helper()
	srv := testenv.StartRedis(t)
	cfg := StreamsConfig{Limit: limit, Lease: lease, Prefix: "r:", Timeout: DefaultTimeout}
	var nodes []*Streams
	for range 2 {
		rdb, err := redisx.Open(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		s, err := NewStreams(rdb, cfg, func() int { return 2 })
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, s)
	}
	return nodes[0], nodes[1]
}

// TestSlotsRenewedWhileCountedDown: a node whose limiter counts Redis down
// still renews its streams' slots where Redis answers (a slow Redis, or a
// cluster with another master down), so another node cannot admit streams
// over the limit once the leases would have lapsed. The first version
// skipped renewals while down: after two leases the other node admitted 2
// more of a limit of 2.
func TestSlotsRenewedWhileCountedDown(t *testing.T) {
	const lease = 600 * time.Millisecond
	a, b := slotNodes(t, 2, lease)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, id := range []string{"a1", "a2"} {
		if ok, _, err := a.Open(ctx, "acc", id); !ok || err != nil {
			t.Fatalf("node a, open %s with Redis up: %v, %v", id, ok, err)
		}
	}
	a.FollowHealth(downLimiter(t))
	go a.Run(ctx)
	go b.Run(ctx)
	time.Sleep(3 * lease)
	n := 0
	for _, id := range []string{"b1", "b2", "b3"} {
		if ok, _, err := b.Open(ctx, "acc", id); ok && err == nil {
			n++
		}
	}
	if n > 0 {
		t.Errorf("node a holds 2 streams of a limit of 2; node b was admitted %d more by Redis", n)
	}
}

// TestSlotClosedWhileCountedDown: a stream closed on a node whose limiter
// counts Redis down frees its slot in Redis at once where Redis answers:
// another node admits the account's next stream. The first version skipped
// the close, and the slot held the account at its limit for up to a lease.
func TestSlotClosedWhileCountedDown(t *testing.T) {
	a, b := slotNodes(t, 1, 15*time.Second)
	ctx := context.Background()
	if ok, _, err := a.Open(ctx, "acc", "a1"); !ok || err != nil {
		t.Fatalf("node a, open with Redis up: %v, %v", ok, err)
	}
	a.FollowHealth(downLimiter(t))
	a.Close(ctx, "acc", "a1")
	if ok, retry, err := b.Open(ctx, "acc", "b1"); !ok || err != nil {
		t.Errorf("node b, open after a closed its stream: %v (retry %v), %v; want Redis's yes", ok, retry, err)
	}
}

package clustertest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

var (
	worldOnce sync.Once
	theWorld  world
	worldOK   bool
)

// world returns the entity sets, discovered once.
func (s *suite) world(t *testing.T) world {
	t.Helper()
	worldOnce.Do(func() {
		theWorld = s.discover(t)
		worldOK = true
	})
	if !worldOK {
		t.Fatal("discovering the synthetic world failed in an earlier test")
	}
	return theWorld
}

// TestReadsSameOnAllNodes: every read route answers the same body and ETag on
// the three API nodes of the cluster, and the ETag of one node is a 304 on
// every other.
func TestReadsSameOnAllNodes(t *testing.T) {
	s := cl(t)
	started := time.Now()
	w := s.world(t)
	probes := s.agree(t, s.apis, s.paths(t, w))
	// Asked again, the answers stay the same: nothing in them moves by itself.
	again, diff := s.collect(t, s.apis, s.paths(t, w))
	if diff != "" {
		t.Fatalf("second round: %s", diff)
	}
	for i, p := range probes {
		if again[i].want.body != p.want.body || again[i].want.etag != p.want.etag {
			t.Errorf("%s: answer changed between two rounds with no write", p.path)
		}
	}
	for _, p := range probes {
		if p.want.etag == "" {
			continue
		}
		for _, n := range s.apis {
			a := getT(t, n, p.path, s.secret, "If-None-Match", p.want.etag)
			if a.status != http.StatusNotModified {
				t.Errorf("%s on %s with If-None-Match %s: status %d, want 304", p.path, n.name, p.want.etag, a.status)
			}
		}
	}
	t.Logf("%d routes × %d nodes agree (%s)", len(probes), len(s.apis), time.Since(started).Round(time.Millisecond))
}

// TestRateLimitExactAcrossNodes: from a fresh window, exactly MD_RATE_LIMIT
// requests are accepted across three API nodes on Redis Cluster, with
// RateLimit-Remaining counting down to 0; the rest get 429.
func TestRateLimitExactAcrossNodes(t *testing.T) {
	s := cl(t)
	started := time.Now()
	const limit, sent = 90, 120
	ctx := context.Background()
	extra := []string{"MD_RATE_LIMIT=" + strconv.Itoa(limit), "MD_RATE_WINDOW=120s"}
	var nodes []*child
	for i := range 3 {
		n, err := s.startAPI(ctx, fmt.Sprintf("limit-api%d", i+1), extra)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.stop(10 * time.Second) })
		nodes = append(nodes, n)
	}
	// Warm each node's Redis Cluster connections and scripts on another
	// account first: exactness is the promise while Redis answers within
	// the node's 50 ms budget, and a node's first dials to the cluster on a
	// loaded machine may not (the fallback then decides with the node's
	// share, docs/api.md). Seen in CI: three requests decided locally.
	_, warm, err := s.newKey(ctx, "clustertest-limits-warmup", "markets:read")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		for range 3 {
			if a, err := get(ctx, n, "/public/v1/key", warm); err != nil || a.status != http.StatusOK {
				t.Fatalf("warm-up on %s: %v %d", n.name, err, a.status)
			}
		}
	}
	// An attempt in which some decision was the fallback's (Redis past the
	// budget on a machine busy with other packages' tests: seen in CI, 94
	// accepted of 90) promised no exactness: it runs once more on a fresh
	// account. Every decision of the attempt that is judged was Redis's.
	for attempt := 1; ; attempt++ {
		local, counts, remaining := exactAttempt(ctx, t, s, nodes, attempt, limit, sent)
		if local > 0 && attempt < 3 {
			t.Logf("attempt %d: %d of %d decisions fell back to the nodes (Redis past the budget); again on a fresh account", attempt, local, sent)
			continue
		}
		if local > 0 {
			t.Fatalf("attempt %d: still %d decisions fell back to the nodes: Redis Cluster is not answering within the limiter's budget", attempt, local)
		}
		if got, want := counts[http.StatusOK], limit; got != want {
			t.Errorf("accepted %d requests across 3 nodes, want exactly MD_RATE_LIMIT = %d (statuses %v)", got, want, counts)
		}
		if got, want := counts[http.StatusTooManyRequests], sent-limit; got != want {
			t.Errorf("429 answers: %d, want %d (statuses %v)", got, want, counts)
		}
		for v := range limit {
			if remaining[v] != 1 {
				t.Errorf("RateLimit-Remaining %d seen %d times among accepted requests, want once", v, remaining[v])
			}
		}
		var leased float64
		for _, n := range nodes {
			v, err := n.metric(ctx, "marketdata_ratelimit_leased_admissions_total")
			if err != nil {
				t.Fatal(err)
			}
			leased += v
		}
		t.Logf("attempt %d: statuses %v, %.0f admissions from leases (%s)", attempt, counts, leased, time.Since(started).Round(time.Millisecond))
		return
	}
}

// TestFailedAuthBlockAcrossNodes: on Redis Cluster, failed authentications
// from one address on one node block that address on every node, for the
// request right after the one that reached MD_AUTHFAIL_LIMIT, though the
// nodes check only addresses whose first failure they heard of (published
// from the failure script, which runs on the address's shard), while an
// address that never failed is admitted.
func TestFailedAuthBlockAcrossNodes(t *testing.T) {
	s := cl(t)
	ctx := context.Background()
	const limit = 5
	// The nodes trust loopback as a proxy, so each request names its address.
	extra := []string{"MD_AUTHFAIL_LIMIT=" + strconv.Itoa(limit), "MD_TRUSTED_PROXIES=127.0.0.1/32"}
	var nodes []*child
	for i := range 2 {
		n, err := s.startAPI(ctx, fmt.Sprintf("authfail-api%d", i+1), extra)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.stop(10 * time.Second) })
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		deadline := time.Now().Add(20 * time.Second)
		for {
			v, err := n.metric(ctx, "marketdata_ratelimit_suspects_complete")
			if err != nil {
				t.Fatal(err)
			}
			if v == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the suspects set was not complete within 20 s", n.name)
			}
			time.Sleep(50 * time.Millisecond) // a gauge of the node: no event to wait on
		}
	}
	_, secret, err := s.newKey(ctx, "clustertest-authfail", "markets:read")
	if err != nil {
		t.Fatal(err)
	}
	from := func(addr string) []string { return []string{"X-Forwarded-For", addr} }
	for round, addr := range []string{"198.51.100.10", "2001:db8::77"} {
		for i := range limit {
			a, err := get(ctx, nodes[0], "/public/v1/key", "md_live_bad"+strconv.Itoa(round*10+i), from(addr)...)
			if err != nil || a.status != http.StatusUnauthorized {
				t.Fatalf("%s failure %d on %s: %v %d, want 401", addr, i+1, nodes[0].name, err, a.status)
			}
		}
		// The failure that reached the limit was answered once every node
		// confirmed it heard of the address (docs/api.md): the next request,
		// on the other node, is refused.
		a, err := get(ctx, nodes[1], "/public/v1/key", secret, from(addr)...)
		if err != nil || a.status != http.StatusTooManyRequests {
			t.Fatalf("%s: a good key on %s right after the %dth failure on %s: %v %d, want 429", addr, nodes[1].name, limit, nodes[0].name, err, a.status)
		}
		if a, err := get(ctx, nodes[1], "/public/v1/key", secret, from("192.0.2.50")...); err != nil || a.status != http.StatusOK {
			t.Fatalf("an address that never failed, on %s: %v %d, want 200", nodes[1].name, err, a.status)
		}
	}
	// Both confirmations came (on the cluster, the channel's subscribers
	// are counted over every node), not the wait's bound.
	if v, err := nodes[0].metric(ctx, "marketdata_ratelimit_blocks_unconfirmed_total"); err != nil || v != 0 {
		t.Errorf("%s: blocks answered unconfirmed: %v, %v; want 0", nodes[0].name, v, err)
	}
}

// exactAttempt sends sent requests of a fresh account over nodes, 9 at a
// time, and returns how many of them the nodes decided without Redis (the
// nodes' Redis-decided admissions fell short of sent by that many), the
// statuses, and how often each RateLimit-Remaining came with a 200.
func exactAttempt(ctx context.Context, t *testing.T, s *suite, nodes []*child, attempt, limit, sent int) (int, map[int]int, map[int]int) {
	t.Helper()
	_, secret, err := s.newKey(ctx, fmt.Sprintf("clustertest-limits-%d", attempt), "markets:read")
	if err != nil {
		t.Fatal(err)
	}
	// The window is fixed on the Redis clock: a burst that crosses its end
	// is two windows' worth (seen in CI: 120 accepted, every
	// RateLimit-Remaining twice). The burst takes a few seconds: start it
	// with 20 s of the window left.
	waitWindowRoom(ctx, t, 120*time.Second, 20*time.Second)
	decided := func() float64 {
		var sum float64
		for _, n := range nodes {
			v, err := n.metric(ctx, "marketdata_ratelimit_admissions_total")
			if err != nil {
				t.Fatal(err)
			}
			sum += v
		}
		return sum
	}
	before := decided()
	type result struct {
		status    int
		remaining string
		err       error
	}
	results := make(chan result, sent)
	var wg sync.WaitGroup
	next := make(chan int, sent)
	for i := range sent {
		next <- i
	}
	close(next)
	for range 9 {
		wg.Go(func() {
			for i := range next {
				a, err := get(ctx, nodes[i%3], "/public/v1/key", secret)
				results <- result{a.status, a.header.Get("RateLimit-Remaining"), err}
			}
		})
	}
	wg.Wait()
	close(results)
	local := sent - int(decided()-before)

	counts := map[int]int{}
	remaining := map[int]int{}
	for r := range results {
		if r.err != nil {
			t.Fatalf("request failed: %v", r.err)
		}
		counts[r.status]++
		if r.status == http.StatusOK {
			n, err := strconv.Atoi(r.remaining)
			if err != nil {
				t.Errorf("200 with RateLimit-Remaining %q", r.remaining)
				continue
			}
			remaining[n]++
		}
	}
	return local, counts, remaining
}

// waitWindowRoom waits, on the Redis clock, until the current fixed window
// of length win has at least need left.
func waitWindowRoom(ctx context.Context, t *testing.T, win, need time.Duration) {
	t.Helper()
	now, err := clusterClient(t).Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms, wms := now.UnixMilli(), win.Milliseconds()
	if left := time.Duration(wms-ms%wms) * time.Millisecond; left < need {
		// The window's end itself is what the test waits for: no event.
		time.Sleep(left + 5*time.Millisecond)
	}
}

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
		t.Logf("attempt %d: statuses %v (%s)", attempt, counts, time.Since(started).Round(time.Millisecond))
		return
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

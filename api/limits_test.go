package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ratelimit"
	"github.com/marketdata/marketdata/store"
)

// limCluster is n API nodes sharing one account window, on a world of the
// test's own, with one markets:read key of that account.
type limCluster struct {
	w      *world
	nodes  []*node
	secret string
}

// limStart starts n nodes sharing rl's windows (its Prefix and Timeout are
// set here), each counting n live nodes, as presence does in production.
// The Redis timeout is raised from the 50ms default so that a slow answer
// under the test's load is not decided by the per-node fallback: these
// tests measure the shared window.
func limStart(t *testing.T, n int, rl ratelimit.Config, opts ...option) *limCluster {
	t.Helper()
	w := newWorld(t)
	rl.Prefix, rl.Timeout = w.prefix, time.Second
	opts = append([]option{func(c *nodeConfig) {
		c.limit = rl
		c.peers = func() int { return n }
	}}, opts...)
	c := &limCluster{w: w}
	for range n {
		c.nodes = append(c.nodes, w.node(t, opts...))
	}
	c.secret, _ = w.newKey(t, keyOpts{scopes: []string{store.ScopeMarketsRead}})
	return c
}

// warnings are the nodes' warnings: a limit decided by a node alone
// (Redis too slow or down) is logged as one.
func (c *limCluster) warnings() []string {
	var all []string
	for _, n := range c.nodes {
		all = append(all, n.warnings()...)
	}
	return all
}

// limAnswer is what the tests look at in an answer.
type limAnswer struct {
	status int
	header http.Header
	code   string // error.code of an error body
}

// get asks n for /key with secret as the bearer key ("" sends none) and,
// when xff is not empty, an X-Forwarded-For header. Any answer but a 200
// must be a contract error.
func (c *limCluster) get(n *node, secret, xff string) (limAnswer, error) {
	var kv []string
	if xff != "" {
		kv = []string{"X-Forwarded-For", xff}
	}
	a, err := n.fetch(context.Background(), "/public/v1/key", secret, kv...)
	if err != nil {
		return limAnswer{}, err
	}
	la := limAnswer{status: a.status, header: a.header}
	if a.status != http.StatusOK {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(a.body, &e); err != nil {
			return la, fmt.Errorf("status %d with a body that is not an error: %q", a.status, a.body)
		}
		la.code = e.Error.Code
	}
	return la, nil
}

func (c *limCluster) mustGet(t *testing.T, n *node, secret, xff string) limAnswer {
	t.Helper()
	a, err := c.get(n, secret, xff)
	if err != nil {
		t.Fatalf("GET %s/public/v1/key: %v", n.base, err)
	}
	return a
}

// redisNow is the Redis clock, which the windows are aligned on.
func (c *limCluster) redisNow(t *testing.T) time.Time {
	t.Helper()
	now, err := c.w.rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("redis TIME: %v", err)
	}
	return now
}

// limCheckHeaders checks the rate-limit headers of an answer that passed
// (200) or was refused by (429) the window; it returns the problem, if any.
func limCheckHeaders(a limAnswer, limit int, w time.Duration) string {
	rem, err := strconv.Atoi(a.header.Get("RateLimit-Remaining"))
	switch {
	case err != nil:
		return fmt.Sprintf("%d without a numeric RateLimit-Remaining: %q", a.status, a.header.Get("RateLimit-Remaining"))
	case a.header.Get("RateLimit-Limit") != strconv.Itoa(limit):
		return fmt.Sprintf("%d with RateLimit-Limit %q, want %d", a.status, a.header.Get("RateLimit-Limit"), limit)
	}
	maxSeconds := int(math.Ceil(w.Seconds()))
	if reset, err := strconv.Atoi(a.header.Get("RateLimit-Reset")); err != nil || reset < 1 || reset > maxSeconds {
		return fmt.Sprintf("%d with RateLimit-Reset %q, want 1..%d", a.status, a.header.Get("RateLimit-Reset"), maxSeconds)
	}
	if a.status == http.StatusOK {
		if rem < 0 || rem > limit-1 {
			return fmt.Sprintf("200 with RateLimit-Remaining %d, want 0..%d", rem, limit-1)
		}
		return ""
	}
	if rem != 0 || a.code != "rate_limited" {
		return fmt.Sprintf("429 with RateLimit-Remaining %d and code %q, want 0 and rate_limited", rem, a.code)
	}
	if ra, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || ra < 1 || ra > maxSeconds {
		return fmt.Sprintf("429 with Retry-After %q, want 1..%d", a.header.Get("Retry-After"), maxSeconds)
	}
	return ""
}

// limLoad is one accuracy case: nodes sharing an account whose window
// accepts limit requests per window, loaded at factor × the limit.
type limLoad struct {
	nodes, limit int
	window       time.Duration
	factor       float64
}

// limWindows and limSenders: each case runs this many whole windows, its
// requests sent from this many goroutines.
const limWindows, limSenders = 3, 8

// TestLimitAccuracy measures, as Unkey's multi-node harness does, how many
// requests N nodes sharing one account window accept under an even load of
// 0.9× and 10× the limit, spread round-robin over the nodes from several
// goroutines.
//
// The measurement is exact: windows are aligned on the Redis clock, so a
// case waits for a window boundary on that clock, sends for k whole windows
// (a small margin inside each end), and stops. Every request is judged by
// Redis between two TIME readings taken before the first request and after
// the last answer; the windows between them bound what may be accepted:
// never more than spanned × L. At 0.9× every request must be accepted; at
// 10×, at least 95% of k × L.
//
// The cases run at once (t.Run from goroutines, which -parallel does not
// throttle): they wait on clocks, not on the CPU.
func TestLimitAccuracy(t *testing.T) {
	t.Parallel()
	var all sync.WaitGroup
	defer all.Wait()
	for _, nodes := range []int{1, 3} {
		for _, lw := range []struct {
			limit  int
			window time.Duration
		}{{5, time.Second}, {100, 2 * time.Second}} {
			for _, f := range []float64{0.9, 10} {
				lc := limLoad{nodes, lw.limit, lw.window, f}
				name := fmt.Sprintf("nodes=%d/limit=%d/window=%v/load=%gx", lc.nodes, lc.limit, lc.window, lc.factor)
				all.Go(func() { t.Run(name, func(t *testing.T) { limMeasure(t, lc) }) })
			}
		}
	}
}

func limMeasure(t *testing.T, lc limLoad) {
	c := limStart(t, lc.nodes, ratelimit.Config{
		Limit: lc.limit, Window: lc.window, AuthFailLimit: 20, AuthFailWindow: time.Minute,
	})
	for _, n := range c.nodes { // warm each node's key cache outside the measured windows
		if a := c.mustGet(t, n, c.secret, ""); a.status != http.StatusOK {
			t.Fatalf("warm-up: got %d %s, want 200", a.status, a.code)
		}
	}

	w, wms := lc.window, lc.window.Milliseconds()
	interval := time.Duration(float64(w) / (lc.factor * float64(lc.limit)))
	startMargin, endMargin := w/50, w/25

	// Wait for the next window boundary on the Redis clock.
	before := time.Now()
	rnow := c.redisNow(t)
	offset := rnow.Sub(before.Add(time.Since(before) / 2)) // Redis clock − local clock
	boundary := time.UnixMilli((rnow.UnixMilli()/wms + 1) * wms)
	time.Sleep(time.Until(boundary.Add(-offset + startMargin))) // a window boundary: time is what is under test
	first := c.redisNow(t)
	start := time.Now()
	end := boundary.Add(-offset + limWindows*w - endMargin)
	total := int(end.Sub(start)/interval) + 1

	var accepted, refused, filled atomic.Int64
	var mu sync.Mutex
	var problems []string
	report := func(p string) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 10 {
			problems = append(problems, p)
		}
	}
	var wg sync.WaitGroup
	for g := range limSenders {
		wg.Go(func() {
			// Request i leaves at start + i × interval, to node i mod N.
			for i := g; i < total; i += limSenders {
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval))) // pacing the load, not waiting for an event
				a, err := c.get(c.nodes[i%lc.nodes], c.secret, "")
				switch {
				case err != nil:
					report(err.Error())
					continue
				case a.status == http.StatusOK:
					accepted.Add(1)
					if a.header.Get("RateLimit-Remaining") == "0" {
						filled.Add(1)
					}
				case a.status == http.StatusTooManyRequests:
					refused.Add(1)
				default:
					report(fmt.Sprintf("request %d: got %d %s, want 200 or 429", i, a.status, a.code))
					continue
				}
				if p := limCheckHeaders(a, lc.limit, w); p != "" {
					report(fmt.Sprintf("request %d: %s", i, p))
				}
			}
		})
	}
	wg.Wait()
	last := c.redisNow(t)
	elapsed := time.Since(start)

	spanned := int(last.UnixMilli()/wms - first.UnixMilli()/wms + 1)
	got := int(accepted.Load())
	t.Logf("sent %d in %v over %d windows (Redis clock), accepted %d = %.3f × windows × limit, refused %d",
		total, elapsed.Round(time.Millisecond), spanned, got, float64(got)/float64(limWindows*lc.limit), refused.Load())
	for _, p := range problems {
		t.Error(p)
	}
	if w := c.warnings(); len(w) > 0 {
		t.Errorf("%d warnings (decisions without Redis?), first: %s", len(w), w[0])
	}
	if spanned != limWindows {
		t.Logf("the run spanned %d windows on the Redis clock, not %d: the upper bound uses %d", spanned, limWindows, spanned)
	}
	if got > spanned*lc.limit {
		t.Errorf("accepted %d in %d windows, want at most %d", got, spanned, spanned*lc.limit)
	}
	if got+int(refused.Load()) != total {
		t.Errorf("answers: got %d accepted + %d refused, want %d in all", got, refused.Load(), total)
	}
	if lc.factor < 1 {
		switch {
		case got == total:
		case filled.Load() == 0:
			t.Errorf("at %gx: accepted %d of %d with no window full (no 200 with RateLimit-Remaining 0), want all", lc.factor, got, total)
		default:
			// A machine too busy to keep the pacing sent late requests
			// together, and they filled a window: those refusals were
			// right. A refusal in a window not full is what fails above.
			t.Logf("at %gx: %d refused after %d windows filled (the load bunched: %v for %v of schedule)",
				lc.factor, total-got, filled.Load(), elapsed.Round(time.Millisecond), (time.Duration(total-1) * interval).Round(time.Millisecond))
		}
		return
	}
	if floor := int(math.Ceil(0.95 * limWindows * float64(lc.limit))); got < floor {
		t.Errorf("at %gx: accepted %d, want at least %d (95%% of %d windows × %d)", lc.factor, got, floor, limWindows, lc.limit)
	}
}

// TestLimitBurstExact: from a fresh window, a burst spread over three nodes
// gets exactly L answers 200, whose RateLimit-Remaining are L-1 … 0, each
// once; every other answer is 429.
func TestLimitBurstExact(t *testing.T) {
	t.Parallel()
	const nodes, limit, calls, goroutines = 3, 60, 180, 30
	const w = 2 * time.Second
	c := limStart(t, nodes, ratelimit.Config{Limit: limit, Window: w, AuthFailLimit: 20, AuthFailWindow: time.Minute})
	// Warm the key caches, then start at a fresh window with room for the burst.
	for _, n := range c.nodes {
		c.mustGet(t, n, c.secret, "")
	}
	var remaining []int
	var refused int
	// A burst that crossed a window boundary (a machine busy with other
	// packages' tests: seen in CI, 3.4 s for the 180 requests) proves
	// nothing: it runs again from the next fresh window.
	for attempt := 1; ; attempt++ {
		var crossed time.Duration
		remaining, refused, crossed = limBurst(t, c, limit, calls, goroutines, nodes, w)
		if crossed == 0 {
			break
		}
		if attempt == 3 {
			t.Fatalf("the burst crossed a window boundary in 3 attempts (the last took %v); cannot judge it", crossed)
		}
		t.Logf("attempt %d: the burst took %v and crossed a window boundary; again from the next window", attempt, crossed)
	}
	slices.Sort(remaining)
	want := make([]int, limit)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(remaining, want) || refused != calls-limit {
		t.Errorf("got %d answers 200 with RateLimit-Remaining %v and %d answers 429; want %d with 0..%d once each and %d",
			len(remaining), remaining, refused, limit, limit-1, calls-limit)
	}
	if w := c.warnings(); len(w) > 0 {
		t.Errorf("%d warnings (decisions without Redis?), first: %s", len(w), w[0])
	}
}

// TestLimitFailedAuthAcrossNodes: failed authentications of one address are
// counted across nodes. The request that reaches the limit still gets its
// 401; the next gets 429 with Retry-After on either node, even with a valid
// key, until the window (started by the first failure) passes. Another
// address is not blocked.
func TestLimitFailedAuthAcrossNodes(t *testing.T) {
	t.Parallel()
	// The window outlasts the eight requests below on a saturated machine
	// (2 s did not: the block ended before the last check).
	const failLimit, failWindow = 4, 6 * time.Second
	// The nodes trust the loopback proxy, so X-Forwarded-For names a second client.
	c := limStart(t, 2, ratelimit.Config{
		Limit: 1000, Window: time.Minute, AuthFailLimit: failLimit, AuthFailWindow: failWindow,
	}, withTrusted("127.0.0.1/32"))
	nodeA, nodeB := c.nodes[0], c.nodes[1]
	const other = "203.0.113.9"

	bad := []string{store.NewSecret(), "mdk_live_short", "", store.NewSecret()} // unknown, malformed, none, unknown
	for i, secret := range bad {
		n := []*node{nodeA, nodeB}[i%2]
		if a := c.mustGet(t, n, secret, ""); a.status != http.StatusUnauthorized || a.code != "unauthorized" {
			t.Fatalf("bad key %d on node %c: got %d %s, want 401 unauthorized", i+1, "AB"[i%2], a.status, a.code)
		}
	}
	var retry int
	for _, r := range []struct {
		name   string
		node   *node
		secret string
	}{
		{"5th bad key on node A", nodeA, store.NewSecret()},
		{"6th bad key on node B", nodeB, store.NewSecret()},
		{"valid key on node A", nodeA, c.secret},
		{"valid key on node B", nodeB, c.secret},
	} {
		a := c.mustGet(t, r.node, r.secret, "")
		ra, err := strconv.Atoi(a.header.Get("Retry-After"))
		if a.status != http.StatusTooManyRequests || a.code != "rate_limited" || err != nil || ra < 1 || ra > int(failWindow/time.Second) {
			t.Fatalf("%s: got %d %s Retry-After %q, want 429 rate_limited with Retry-After 1..%d",
				r.name, a.status, a.code, a.header.Get("Retry-After"), int(failWindow/time.Second))
		}
		retry = ra
	}
	for i, n := range []*node{nodeA, nodeB} {
		if a := c.mustGet(t, n, c.secret, other); a.status != http.StatusOK {
			t.Errorf("valid key from %s on node %c: got %d %s, want 200", other, "AB"[i], a.status, a.code)
		}
	}
	if a := c.mustGet(t, nodeA, store.NewSecret(), other); a.status != http.StatusUnauthorized {
		t.Errorf("bad key from %s: got %d %s, want 401 (its own count)", other, a.status, a.code)
	}

	// The failed-auth window elapsing is what is under test: no event to wait on.
	time.Sleep(time.Duration(retry)*time.Second + 100*time.Millisecond)
	for i, n := range []*node{nodeA, nodeB} {
		if a := c.mustGet(t, n, c.secret, ""); a.status != http.StatusOK {
			t.Errorf("valid key on node %c after Retry-After: got %d %s, want 200", "AB"[i], a.status, a.code)
		}
	}
}

// limBurst sends calls requests from goroutines spread over the nodes,
// starting at a fresh window on the Redis clock, and returns the
// RateLimit-Remaining of the 200s, the count of 429s, and how long the
// burst took when it crossed a window boundary (0 when it did not).
func limBurst(t *testing.T, c *limCluster, limit, calls, goroutines, nodes int, w time.Duration) ([]int, int, time.Duration) {
	t.Helper()
	ms := c.redisNow(t).UnixMilli()
	// The window boundary on the Redis clock is what is under test: no event to wait on.
	time.Sleep(time.Duration(w.Milliseconds()-ms%w.Milliseconds())*time.Millisecond + 20*time.Millisecond)
	first := c.redisNow(t)

	var mu sync.Mutex
	var remaining []int
	refused := 0
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for i := g; i < calls; i += goroutines {
				a, err := c.get(c.nodes[i%nodes], c.secret, "")
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("request %d: %v", i, err)
				case a.status == http.StatusOK:
					n, _ := strconv.Atoi(a.header.Get("RateLimit-Remaining"))
					remaining = append(remaining, n)
				case a.status == http.StatusTooManyRequests:
					refused++
				default:
					t.Errorf("request %d: got %d %s, want 200 or 429", i, a.status, a.code)
				}
				if p := limCheckHeaders(a, limit, w); err == nil && p != "" {
					t.Errorf("request %d: %s", i, p)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	last := c.redisNow(t)
	wms := w.Milliseconds()
	if first.UnixMilli()/wms != last.UnixMilli()/wms {
		return nil, 0, last.Sub(first)
	}
	return remaining, refused, 0
}

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/ratelimit"
	"github.com/marketdata/marketdata/store"
)

// limPepper is the key pepper of every node of these tests.
var limPepper = []byte("limits-test-pepper-0123456789abcdef")

// limCluster is N API nodes in this process, on one Postgres database and
// one Redis prefix of the test's own, with one account and one valid key.
type limCluster struct {
	urls   []string
	secret string
	rdb    *redis.Client
	client *http.Client
	// warns counts the nodes' warnings: a limit decided by a node alone
	// (Redis too slow or down) is logged as one.
	warns *limWarnings
}

// limWarnings is a slog handler that keeps the warnings and above.
type limWarnings struct {
	mu   sync.Mutex
	msgs []string
}

func (h *limWarnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *limWarnings) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	h.msgs = append(h.msgs, msg)
	return nil
}
func (h *limWarnings) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *limWarnings) WithGroup(string) slog.Handler      { return h }

func (h *limWarnings) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.msgs)
}

// limStart starts n nodes sharing rl (its Prefix is set here). The Redis
// timeout is raised from the 50ms default so that a slow answer under the
// test's load is not decided by the per-node fallback: these tests measure
// the shared window.
func limStart(t *testing.T, n int, rl ratelimit.Config, trusted []netip.Prefix) *limCluster {
	t.Helper()
	ctx := context.Background()
	dsn := testenv.Database(t)
	rdb, prefix := testenv.Redis(t)
	if _, err := store.Migrate(ctx, dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool)

	now := time.Now()
	acc, err := st.CreateAccount(ctx, "limits", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetAccess(ctx, acc.ID, true, now); err != nil {
		t.Fatal(err)
	}
	secret := store.NewSecret()
	if _, err := st.CreateKey(ctx, store.NewKey{
		AccountID: acc.ID, SecretHash: store.HashSecret(limPepper, secret), Last4: secret[len(secret)-4:],
		Scopes: []string{store.ScopeMarketsRead}, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}

	opt, err := redis.ParseURL(testenv.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rl.Prefix = prefix
	rl.Timeout = time.Second
	c := &limCluster{
		secret: secret, rdb: rdb, warns: &limWarnings{},
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	for range n {
		nodeRdb := redis.NewClient(opt) // each node has its own connections, as in production
		t.Cleanup(func() { nodeRdb.Close() })
		lim, err := ratelimit.New(nodeRdb, rl, func() int { return n }, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		ac := api.DefaultConfig()
		ac.DocsOrigin, ac.TrustedProxies = "http://127.0.0.1:8081", trusted
		ac.KeyPepper, ac.CursorSecret = limPepper, []byte("limits-test-cursor-secret-0123456789")
		srv, err := api.New(ac, api.Deps{Credentials: st, Limiter: lim, Log: slog.New(c.warns), Registry: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln) //nolint:errcheck // ends with Shutdown
		t.Cleanup(func() {
			// Shutdown waits for open connections: close the client's idle ones first.
			c.client.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx) //nolint:errcheck // cleanup: the test has its answers
		})
		c.urls = append(c.urls, "http://"+ln.Addr().String()+"/public/v1/key")
	}
	return c
}

// limAnswer is what the tests look at in an answer.
type limAnswer struct {
	status int
	header http.Header
	code   string // error.code of an error body
}

// get calls url with secret as the bearer key ("" sends none) and, when
// xff is not empty, an X-Forwarded-For header.
func (c *limCluster) get(url, secret, xff string) (limAnswer, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return limAnswer{}, err
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return limAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return limAnswer{}, err
	}
	a := limAnswer{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			return a, fmt.Errorf("status %d with a body that is not an error: %q", resp.StatusCode, body)
		}
		a.code = e.Error.Code
	}
	return a, nil
}

func (c *limCluster) mustGet(t *testing.T, url, secret, xff string) limAnswer {
	t.Helper()
	a, err := c.get(url, secret, xff)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return a
}

// redisNow is the Redis clock, which the windows are aligned on.
func (c *limCluster) redisNow(t *testing.T) time.Time {
	t.Helper()
	now, err := c.rdb.Time(context.Background()).Result()
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
	}, nil)
	for _, u := range c.urls { // warm each node's key cache outside the measured windows
		if a := c.mustGet(t, u, c.secret, ""); a.status != http.StatusOK {
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
	time.Sleep(time.Until(boundary.Add(-offset + startMargin)))
	first := c.redisNow(t)
	start := time.Now()
	end := boundary.Add(-offset + limWindows*w - endMargin)
	total := int(end.Sub(start)/interval) + 1

	var accepted, refused atomic.Int64
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
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
				a, err := c.get(c.urls[i%lc.nodes], c.secret, "")
				switch {
				case err != nil:
					report(err.Error())
					continue
				case a.status == http.StatusOK:
					accepted.Add(1)
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
	if w := c.warns.all(); len(w) > 0 {
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
		if got != total {
			t.Errorf("at %gx: accepted %d of %d, want all", lc.factor, got, total)
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
	c := limStart(t, nodes, ratelimit.Config{Limit: limit, Window: w, AuthFailLimit: 20, AuthFailWindow: time.Minute}, nil)
	// Warm the key caches, then start at a fresh window with room for the burst.
	for _, u := range c.urls {
		c.mustGet(t, u, c.secret, "")
	}
	ms := c.redisNow(t).UnixMilli()
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
				a, err := c.get(c.urls[i%nodes], c.secret, "")
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
		t.Fatalf("the burst took %v and crossed a window boundary; cannot judge it", last.Sub(first))
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
	if w := c.warns.all(); len(w) > 0 {
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
	const failLimit, failWindow = 4, 2 * time.Second
	// The nodes trust the loopback proxy, so X-Forwarded-For names a second client.
	c := limStart(t, 2, ratelimit.Config{
		Limit: 1000, Window: time.Minute, AuthFailLimit: failLimit, AuthFailWindow: failWindow,
	}, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	nodeA, nodeB := c.urls[0], c.urls[1]
	const other = "203.0.113.9"

	bad := []string{store.NewSecret(), "mdk_live_short", "", store.NewSecret()} // unknown, malformed, none, unknown
	for i, secret := range bad {
		url := []string{nodeA, nodeB}[i%2]
		if a := c.mustGet(t, url, secret, ""); a.status != http.StatusUnauthorized || a.code != "unauthorized" {
			t.Fatalf("bad key %d on node %c: got %d %s, want 401 unauthorized", i+1, "AB"[i%2], a.status, a.code)
		}
	}
	var retry int
	for _, r := range []struct {
		name, url, secret string
	}{
		{"5th bad key on node A", nodeA, store.NewSecret()},
		{"6th bad key on node B", nodeB, store.NewSecret()},
		{"valid key on node A", nodeA, c.secret},
		{"valid key on node B", nodeB, c.secret},
	} {
		a := c.mustGet(t, r.url, r.secret, "")
		ra, err := strconv.Atoi(a.header.Get("Retry-After"))
		if a.status != http.StatusTooManyRequests || a.code != "rate_limited" || err != nil || ra < 1 || ra > int(failWindow/time.Second) {
			t.Fatalf("%s: got %d %s Retry-After %q, want 429 rate_limited with Retry-After 1..%d",
				r.name, a.status, a.code, a.header.Get("Retry-After"), int(failWindow/time.Second))
		}
		retry = ra
	}
	for i, url := range []string{nodeA, nodeB} {
		if a := c.mustGet(t, url, c.secret, other); a.status != http.StatusOK {
			t.Errorf("valid key from %s on node %c: got %d %s, want 200", other, "AB"[i], a.status, a.code)
		}
	}
	if a := c.mustGet(t, nodeA, store.NewSecret(), other); a.status != http.StatusUnauthorized {
		t.Errorf("bad key from %s: got %d %s, want 401 (its own count)", other, a.status, a.code)
	}

	time.Sleep(time.Duration(retry)*time.Second + 100*time.Millisecond)
	for i, url := range []string{nodeA, nodeB} {
		if a := c.mustGet(t, url, c.secret, ""); a.status != http.StatusOK {
			t.Errorf("valid key on node %c after Retry-After: got %d %s, want 200", "AB"[i], a.status, a.code)
		}
	}
}

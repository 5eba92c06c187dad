package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/api/stream"
	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/metrictest"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/ratelimit"
)

// nodeConfig is what a test may change of a node before it starts.
type nodeConfig struct {
	api    api.Config
	limit  ratelimit.Config
	listen string
	// wrap, when set, wraps the node's listener (edge tests count what
	// the node does to its connections).
	wrap func(net.Listener) net.Listener
	// rdb is the node's Redis (the limiter's, and the cache's on a world
	// with ingest); nil gives the node a client of its own on the shared
	// server, as each production node has its own connections.
	rdb   redis.UniversalClient
	creds api.Credentials
	setup func(*api.Server)
	// peers counts the live nodes for the limiter's per-node fallback (nil:
	// this one alone).
	peers func() int
	// fallback and reader serve the data routes on a world with ingest,
	// through a cache.Reader; without one the node has only the front door.
	fallback cache.Store
	reader   cache.ReaderConfig
	// load runs Server.Start before serving, as `marketdata api` does.
	load bool
	// slots is the open-stream limit of a node that serves data (it
	// serves streams too).
	slots ratelimit.StreamsConfig
	// candles wraps the store the candles route reads (nil: the world's).
	candles func(api.Candles) api.Candles
}

type option func(*nodeConfig)

func withTrusted(cidrs ...string) option {
	return func(c *nodeConfig) {
		for _, s := range cidrs {
			c.api.TrustedProxies = append(c.api.TrustedProxies, netip.MustParsePrefix(s))
		}
	}
}

// withLimit sets the account window's limit. A test that sets a limit
// asserts exact counts, which hold only while Redis decides them: the
// limiter's Redis budget is then 2 s, not 50 ms, so a box busy with other
// suites does not send admissions to the node-alone fallback (each node its
// own window) and let a request past the limit (TestUsageCountsExactly did,
// in CI beside two suites). The fallback has tests of its own.
func withLimit(n int) option {
	return func(c *nodeConfig) { c.limit.Limit, c.limit.Timeout = n, exactLimitTimeout }
}

// exactLimitTimeout is the limiter's Redis budget in tests of exact counts.
const exactLimitTimeout = 2 * time.Second

func withWindow(d time.Duration) option { return func(c *nodeConfig) { c.limit.Window = d } }

// withAuthFailLimit sets the failed-authentication limit, with the exact
// counts' Redis budget (withLimit).
func withAuthFailLimit(n int) option {
	return func(c *nodeConfig) { c.limit.AuthFailLimit, c.limit.Timeout = n, exactLimitTimeout }
}
func withListen(addr string) option { return func(c *nodeConfig) { c.listen = addr } }
func withListener(wrap func(net.Listener) net.Listener) option {
	return func(c *nodeConfig) { c.wrap = wrap }
}
func withKeyCacheTTL(d time.Duration) option {
	return func(c *nodeConfig) { c.api.KeyCacheTTL = d }
}
func withRedis(rdb redis.UniversalClient) option { return func(c *nodeConfig) { c.rdb = rdb } }
func withCredentials(cr api.Credentials) option  { return func(c *nodeConfig) { c.creds = cr } }
func withSetup(fn func(*api.Server)) option      { return func(c *nodeConfig) { c.setup = fn } }

// withMaxConns caps the node's open connections.
func withMaxConns(n int) option { return func(c *nodeConfig) { c.api.MaxConns = n } }

// withTimeouts sets the request deadline (from a request's first byte) and
// the idle wait; the contract's 10 s and 60 s are too long for a test.
func withTimeouts(request, idle time.Duration) option {
	return func(c *nodeConfig) { c.api.RequestTimeout, c.api.IdleTimeout = request, idle }
}

// withCacheTTL sets how long the node serves what it holds in memory
// without a change notice.
func withCacheTTL(d time.Duration) option { return func(c *nodeConfig) { c.reader.TTL = d } }

// withFilterScan sets how many listed events one filtered page read
// examines (cache.ReaderConfig.FilterScan).
func withFilterScan(n int) option { return func(c *nodeConfig) { c.reader.FilterScan = n } }

// withCandles wraps the store the node's candles route reads.
func withCandles(wrap func(api.Candles) api.Candles) option {
	return func(c *nodeConfig) { c.candles = wrap }
}

// withPollEvery sets how often the node reads Redis's change number in the
// background (cache.ReaderConfig.PollEvery).
func withPollEvery(d time.Duration) option { return func(c *nodeConfig) { c.reader.PollEvery = d } }

// withStream changes the node's stream settings (ping, pong, stall times).
func withStream(fn func(*stream.Config)) option { return func(c *nodeConfig) { fn(&c.api.Stream) } }

// withNoticeSubject makes the node listen for change notices on subject
// (one ingest does not publish on: every notice is lost to it).
func withNoticeSubject(subject string) option {
	return func(c *nodeConfig) { c.api.NoticeSubject = subject }
}

// withSearchResync sets how often the node's search index reloads in full.
func withSearchResync(d time.Duration) option {
	return func(c *nodeConfig) { c.api.SearchResync = d }
}

// mustLimiter is ratelimit.New for a config the test knows is valid.
func mustLimiter(t testing.TB, rdb redis.UniversalClient, cfg ratelimit.Config) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(rdb, cfg, nil, nil)
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	return l
}

// readerConfig is the Reader's production configuration, but for a Redis
// timeout that a loaded test machine does not hit by chance.
func readerConfig() cache.ReaderConfig {
	c := cache.DefaultReaderConfig()
	c.RedisTimeout = time.Second
	return c
}

// node is one running API node on a real loopback listener.
type node struct {
	srv  *api.Server
	base string // http://host:port
	logs *testenv.LogBuffer
	w    *world
	// reg holds the node's metrics.
	reg *prometheus.Registry
	// served is closed when Serve has returned serveErr.
	served   chan struct{}
	serveErr error
	stopOnce sync.Once
	stopErr  error
}

// node starts an API node on the world's services, with a NATS connection
// and (unless an option gives one) a Redis client of its own, and shuts it
// down when the test ends. On a world with ingest the node also serves the
// data routes from the worker's cache, loaded (Start) before it serves, with
// a limit no test exhausts unless an option lowers it.
func (w *world) node(t testing.TB, opts ...option) *node {
	t.Helper()
	cfg := nodeConfig{
		api: api.DefaultConfig(),
		limit: ratelimit.Config{
			Limit: 100, Window: time.Minute, AuthFailLimit: 100, AuthFailWindow: 5 * time.Minute, Prefix: w.prefix,
			Timeout: 50 * time.Millisecond,
		},
		listen: "127.0.0.1:0", creds: w.st, reader: readerConfig(),
		slots: ratelimit.StreamsConfig{Limit: 10, Lease: 15 * time.Second, Prefix: w.prefix, Timeout: 50 * time.Millisecond},
	}
	cfg.api.DocsOrigin, cfg.api.AppOrigins = docsOrigin, []string{appOrigin}
	cfg.api.KeyPepper, cfg.api.CursorSecret = w.pepper, w.cursor
	cfg.api.KeyNoticeSubject, cfg.api.NoticeSubject = w.names.KeySubject, w.names.NoticeSubject
	if w.cache != nil {
		cfg.limit.Limit = 1_000_000
		cfg.fallback, cfg.load = w.st, true
		// Short, so that a flushed Redis is noticed (and repaired) by the
		// next snapshot well within the tests' patience.
		cfg.reader.TTL = 200 * time.Millisecond
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.rdb == nil {
		opt, err := redis.ParseURL(testenv.RedisURL)
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opt)
		t.Cleanup(func() { rdb.Close() }) // after the node's shutdown (cleanups run last first)
		cfg.rdb = rdb
	}
	return w.start(t, cfg)
}

// start runs a node of cfg with a NATS connection of its own, and shuts it
// down when the test ends.
func (w *world) start(t testing.TB, cfg nodeConfig) *node {
	t.Helper()
	nc, err := nats.Connect(testenv.NATSURL, nats.Timeout(3*time.Second))
	if err != nil {
		testenv.Unavailable(t, "NATS", err)
	}
	logs := &testenv.LogBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var reader *cache.Reader
	if w.cache != nil {
		// On the node's Redis, which an option may have chosen.
		reader = newReader(t, cache.New(cfg.rdb, w.prefix, w.rules), cfg, nc, log)
	}
	limiter, err := ratelimit.New(cfg.rdb, cfg.limit, cfg.peers, nil)
	if err != nil {
		nc.Close()
		t.Fatalf("ratelimit.New: %v", err)
	}
	// Leases and suspects, as in production (cmd/marketdata).
	go limiter.Run(t.Context())
	reg := prometheus.NewRegistry()
	deps := api.Deps{
		Credentials: cfg.creds, Reader: reader, Limiter: limiter, NC: nc, Log: log, Now: w.clock.Now, Registry: reg,
		Usage: w.st,
	}
	var slots *ratelimit.Streams
	if reader != nil {
		if slots, err = ratelimit.NewStreams(cfg.rdb, cfg.slots, cfg.peers); err != nil {
			nc.Close()
			t.Fatalf("ratelimit.NewStreams: %v", err)
		}
		deps.StreamSlots = slots
		// Candles are read from the world's database, as the fallback's
		// store may be one an option took down.
		deps.Candles = w.st
		if cfg.candles != nil {
			deps.Candles = cfg.candles(w.st)
		}
	}
	srv, err := api.New(cfg.api, deps)
	if err != nil {
		nc.Close()
		t.Fatalf("api.New: %v", err)
	}
	if cfg.setup != nil {
		cfg.setup(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if slots != nil {
		go slots.Run(ctx)
	}
	if cfg.load {
		if err := srv.Start(ctx); err != nil {
			cancel()
			nc.Close()
			t.Fatalf("Start: %v", err)
		}
		// Start loads in the background: wait until the node is ready.
		for deadline := time.Now().Add(30 * time.Second); srv.Ready() != nil; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				cancel()
				nc.Close()
				t.Fatalf("node not ready 30 s after Start: %v", srv.Ready())
			}
		}
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		cancel()
		nc.Close()
		t.Fatalf("listen %s: %v", cfg.listen, err)
	}
	if cfg.wrap != nil {
		ln = cfg.wrap(ln)
	}
	n := &node{srv: srv, base: "http://" + ln.Addr().String(), logs: logs, w: w, reg: reg, served: make(chan struct{})}
	go func() {
		n.serveErr = srv.Serve(ln)
		close(n.served)
	}()
	t.Cleanup(func() {
		cancel()
		// Shutdown waits for open connections: close the client's idle ones first.
		w.client.CloseIdleConnections()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if err := n.shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-n.served
		if n.serveErr != nil {
			t.Errorf("serve: %v", n.serveErr)
		}
		nc.Close()
		if t.Failed() {
			t.Logf("node %s log:\n%.4000s", n.base, logs.String())
		}
	})
	// One answered request proves Serve runs, so Shutdown cannot race it; the
	// flush makes the notice subscriptions live before the test publishes.
	n.do(t, http.MethodGet, "/", nil)
	if err := nc.Flush(); err != nil {
		t.Fatalf("nats flush: %v", err)
	}
	return n
}

// newReader is a node's Reader over c, wired as cmd/marketdata wires it:
// its repairs are announced on the node's change subject.
func newReader(t testing.TB, c *cache.Cache, cfg nodeConfig, nc *nats.Conn, log *slog.Logger) *cache.Reader {
	t.Helper()
	subject := cfg.api.NoticeSubject
	r, err := cache.NewReader(c, cfg.fallback, cfg.reader, cache.ReaderDeps{
		Log:     log,
		Publish: func(n notice.Change) error { return notice.Publish(nc, subject, n.Encode()) },
	})
	if err != nil {
		t.Fatalf("cache.NewReader: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// shutdown shuts the node down, once: a test that does so itself (and reads
// the result) leaves the cleanup only the wait for Serve.
func (n *node) shutdown(ctx context.Context) error {
	n.stopOnce.Do(func() { n.stopErr = n.srv.Shutdown(ctx) })
	return n.stopErr
}

// counter is the node's counter (or gauge) name of the series labels
// name (0 when it has none yet).
func (n *node) counter(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return metrictest.Value(t, n.reg, name, labels...)
}

// memoryServes waits until a read of path is answered from node memory
// (marketdata_reads_total of resource, layer memory, moves), reading it
// again and again: after its start a node trusts its memory only once it
// has seen the change notices of the writes in flight (cache.Reader).
func (n *node) memoryServes(t testing.TB, path, secret, resource string) {
	t.Helper()
	labels := []string{"resource", resource, "layer", "memory"}
	before := n.counter(t, "marketdata_reads_total", labels...)
	for deadline := time.Now().Add(5 * time.Second); n.counter(t, "marketdata_reads_total", labels...) == before; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not answered from node memory within 5 s", path)
		}
		n.get(t, path, secret)
	}
}

// searchReloaded waits until a full Load of the node's search index that
// began after the call has completed: two more than have completed now, as
// one may be under way.
func (n *node) searchReloaded(t testing.TB) {
	t.Helper()
	want := n.srv.SearchLoads() + 2
	for deadline := time.Now().Add(5 * time.Second); n.srv.SearchLoads() < want; {
		if time.Now().After(deadline) {
			t.Fatalf("search index: %d full loads 5 s later, want %d", n.srv.SearchLoads(), want)
		}
		time.Sleep(5 * time.Millisecond) // polling the load count
	}
}

// warnings are the node's log lines at level WARN and above: a limit the
// node decided alone (Redis too slow or down) is logged as one.
func (n *node) warnings() []string {
	var out []string
	for line := range strings.Lines(n.logs.String()) {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// answer is a complete HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// get sends GET path with the key (none when secret is empty), a cookie
// (which the node must ignore), and extra header lines as name, value pairs;
// a repeated name gives several lines.
func (n *node) get(t testing.TB, path, secret string, kv ...string) answer {
	t.Helper()
	a, err := n.fetch(t.Context(), path, secret, kv...)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return a
}

// fetch is get for goroutines other than the test's: it returns what went
// wrong instead of ending the test.
func (n *node) fetch(ctx context.Context, path, secret string, kv ...string) (answer, error) {
	h := http.Header{}
	if secret != "" {
		h.Set("Authorization", "Bearer "+secret)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return n.send(ctx, http.MethodGet, path, h)
}

func (n *node) do(t testing.TB, method, path string, h http.Header) answer {
	t.Helper()
	a, err := n.send(t.Context(), method, path, h)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

func (n *node) send(ctx context.Context, method, path string, h http.Header) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, n.base+path, nil)
	if err != nil {
		return answer{}, err
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Cookie", "session=s3cr3t; md_session=abc")
	resp, err := n.w.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, fmt.Errorf("read body: %w", err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

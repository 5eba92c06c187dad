package api_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/ratelimit"
	"github.com/marketdata/marketdata/store"
)

const (
	docsOrigin = "http://docs.example.test:8081"
	appOrigin  = "https://app.example.test"
	evilOrigin = "https://evil.example.test"
)

// clock follows real time plus an offset the test can move forward, so the
// key cache TTL still runs in real time while expiry can be jumped over.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// env is one test's slice of the shared services: a migrated database, a
// Redis key prefix, a NATS notice subject, the pepper every node of the test
// shares, and the clock they all read.
type env struct {
	dsn     string
	st      *store.Store
	rdb     *redis.Client
	prefix  string
	nc      *nats.Conn
	subject string
	pepper  []byte
	cursor  []byte
	clock   *clock
	client  *http.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dsn := testenv.Database(t)
	if _, err := store.Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	pool, err := store.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(pool.Close)
	rdb, prefix := testenv.Redis(t)
	nc, names := testenv.NATS(t)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &env{
		dsn: dsn, st: store.New(pool), rdb: rdb, prefix: prefix, nc: nc, subject: names.NoticeSubject,
		pepper: randomBytes(32), cursor: randomBytes(32), clock: &clock{},
		client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails
	return b
}

// nodeConfig is what a test may change of a node before it starts.
type nodeConfig struct {
	api    api.Config
	limit  ratelimit.Config
	listen string
	rdb    redis.UniversalClient
	creds  api.Credentials
	setup  func(*api.Server)
	// cache and fallback serve the data routes (rtWorld's nodes), through
	// a cache.Reader of config reader; without a cache the node has only
	// the front door.
	cache    *cache.Cache
	fallback cache.Store
	reader   cache.ReaderConfig
	// load runs Server.Start before serving, as `marketdata api` does.
	load bool
}

type option func(*nodeConfig)

func withTrusted(cidrs ...string) option {
	return func(c *nodeConfig) {
		for _, s := range cidrs {
			c.api.TrustedProxies = append(c.api.TrustedProxies, netip.MustParsePrefix(s))
		}
	}
}

func withLimit(n int) option            { return func(c *nodeConfig) { c.limit.Limit = n } }
func withWindow(d time.Duration) option { return func(c *nodeConfig) { c.limit.Window = d } }
func withAuthFailLimit(n int) option    { return func(c *nodeConfig) { c.limit.AuthFailLimit = n } }
func withListen(addr string) option     { return func(c *nodeConfig) { c.listen = addr } }
func withKeyCacheTTL(d time.Duration) option {
	return func(c *nodeConfig) { c.api.KeyCacheTTL = d }
}
func withRedis(rdb redis.UniversalClient) option { return func(c *nodeConfig) { c.rdb = rdb } }
func withCredentials(cr api.Credentials) option  { return func(c *nodeConfig) { c.creds = cr } }
func withSetup(fn func(*api.Server)) option      { return func(c *nodeConfig) { c.setup = fn } }

// mustLimiter is ratelimit.New for a config the test knows is valid.
func mustLimiter(t testing.TB, rdb redis.UniversalClient, cfg ratelimit.Config) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(rdb, cfg, nil, nil)
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	return l
}

// node is one running API node on a real loopback listener.
type node struct {
	srv  *api.Server
	base string // http://host:port
	logs *testenv.LogBuffer
	e    *env
	// reg holds the node's metrics.
	reg *prometheus.Registry
}

// counter is the node's counter name with labels (0 when it has none yet).
func (n *node) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// memoryServes waits until a read of path is answered from node memory
// (marketdata_reads_total of resource, layer memory, moves), reading it
// again and again: after its start a node trusts its memory only once it
// has seen the change notices of the writes in flight (cache.Reader).
func (n *node) memoryServes(t *testing.T, path, secret, resource string) {
	t.Helper()
	labels := map[string]string{"resource": resource, "layer": "memory"}
	before := n.counter(t, "marketdata_reads_total", labels)
	for deadline := time.Now().Add(5 * time.Second); n.counter(t, "marketdata_reads_total", labels) == before; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not answered from node memory within 5 s", path)
		}
		n.get(t, path, secret)
	}
}

// node starts an API node on the env's services, with a NATS connection of
// its own, and shuts it down when the test ends.
func (e *env) node(t *testing.T, opts ...option) *node {
	t.Helper()
	cfg := nodeConfig{
		api: api.DefaultConfig(),
		limit: ratelimit.Config{
			Limit: 100, Window: time.Minute, AuthFailLimit: 100, AuthFailWindow: 5 * time.Minute, Prefix: e.prefix,
			Timeout: 50 * time.Millisecond,
		},
		listen: "127.0.0.1:0", rdb: e.rdb, creds: e.st, reader: readerConfig(),
	}
	cfg.api.DocsOrigin, cfg.api.AppOrigins = docsOrigin, []string{appOrigin}
	cfg.api.KeyPepper, cfg.api.CursorSecret, cfg.api.KeyNoticeSubject = e.pepper, e.cursor, e.subject
	for _, o := range opts {
		o(&cfg)
	}
	return e.start(t, cfg)
}

// start runs a node of cfg with a NATS connection of its own, and shuts it
// down when the test ends.
func (e *env) start(t *testing.T, cfg nodeConfig) *node {
	t.Helper()
	nc, err := nats.Connect(testenv.NATSURL, nats.Timeout(3*time.Second))
	if err != nil {
		testenv.Unavailable(t, "NATS", err)
	}
	logs := &testenv.LogBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var reader *cache.Reader
	if cfg.cache != nil {
		reader = newReader(t, cfg, nc, log)
	}
	reg := prometheus.NewRegistry()
	srv, err := api.New(cfg.api, api.Deps{
		Credentials: cfg.creds, Reader: reader,
		Limiter:  mustLimiter(t, cfg.rdb, cfg.limit),
		NC:       nc,
		Log:      log,
		Now:      e.clock.Now,
		Registry: reg,
	})
	if err != nil {
		nc.Close()
		t.Fatalf("api.New: %v", err)
	}
	if cfg.setup != nil {
		cfg.setup(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
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
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	n := &node{srv: srv, base: "http://" + ln.Addr().String(), logs: logs, e: e, reg: reg}
	t.Cleanup(func() {
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
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

// answer is a complete HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// get sends GET path with the key (none when secret is empty), a cookie
// (which the node must ignore), and extra header lines as name, value pairs;
// a repeated name gives several lines.
func (n *node) get(t *testing.T, path, secret string, kv ...string) answer {
	t.Helper()
	h := http.Header{}
	if secret != "" {
		h.Set("Authorization", "Bearer "+secret)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return n.do(t, http.MethodGet, path, h)
}

func (n *node) do(t *testing.T, method, path string, h http.Header) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, n.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Cookie", "session=s3cr3t; md_session=abc")
	resp, err := n.e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

// keyOpts shape a key; zero values mean a plain 90-day key without allowlist.
type keyOpts struct {
	secret  string // "" = a fresh one
	scopes  []string
	allow   []string
	created time.Time
	expires time.Time
}

// account creates an account; granted gives it API access.
func (e *env) account(t *testing.T, granted bool) string {
	t.Helper()
	a, err := e.st.CreateAccount(t.Context(), "test "+t.Name(), e.clock.Now())
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	if granted {
		e.setAccess(t, a.ID, true)
	}
	return a.ID
}

func (e *env) setAccess(t *testing.T, accountID string, granted bool) {
	t.Helper()
	if _, err := e.st.SetAccess(t.Context(), accountID, granted, e.clock.Now()); err != nil {
		t.Fatalf("set access of %s: %v", accountID, err)
	}
}

// key creates a key for an account with access and returns its secret.
func (e *env) key(t *testing.T, accountID string, o keyOpts) (string, *store.Key) {
	t.Helper()
	if o.created.IsZero() {
		o.created = e.clock.Now()
	}
	if o.expires.IsZero() {
		o.expires = o.created.Add(90 * 24 * time.Hour)
	}
	if o.scopes == nil {
		o.scopes = []string{}
	}
	var cidrs []netip.Prefix
	for _, s := range o.allow {
		cidrs = append(cidrs, netip.MustParsePrefix(s))
	}
	secret := o.secret
	if secret == "" {
		secret = store.NewSecret()
	}
	k, err := e.st.CreateKey(t.Context(), store.NewKey{
		AccountID: accountID, SecretHash: store.HashSecret(e.pepper, secret), Last4: secret[len(secret)-4:],
		Scopes: o.scopes, IPAllowlist: cidrs, CreatedAt: o.created, ExpiresAt: o.expires,
	})
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	return secret, k
}

// newKey is a fresh account with access and one key shaped by o.
func (e *env) newKey(t *testing.T, o keyOpts) (secret string, k *store.Key) {
	t.Helper()
	return e.key(t, e.account(t, true), o)
}

func (e *env) revoke(t *testing.T, keyID string) {
	t.Helper()
	if _, err := e.st.RevokeKey(t.Context(), keyID, e.clock.Now()); err != nil {
		t.Fatalf("revoke %s: %v", keyID, err)
	}
}

// notify publishes a change notice exactly as cmd/marketdata's notifyKeys does.
func (e *env) notify(t *testing.T, accountID, keyID string) {
	t.Helper()
	data, _ := json.Marshal(map[string]string{"account_id": accountID, "key_id": keyID})
	if err := e.nc.Publish(e.subject, data); err != nil {
		t.Fatalf("publish notice: %v", err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatalf("flush notice: %v", err)
	}
}

// withCacheTTL sets how long the node serves what it holds in memory
// without a change notice.
func withCacheTTL(d time.Duration) option { return func(c *nodeConfig) { c.reader.TTL = d } }

// readerConfig is the Reader's production configuration (cmd/marketdata),
// but for a Redis timeout that a loaded test machine does not hit by chance.
func readerConfig() cache.ReaderConfig {
	return cache.ReaderConfig{
		TTL: 2 * time.Second, PriceBytes: 64 << 20, EventBytes: 32 << 20, PageBytes: 32 << 20,
		NoticeWait: 500 * time.Millisecond, RedisTimeout: time.Second, Repairs: 16,
	}
}

// newReader is the node's Reader, wired as cmd/marketdata wires it: its
// repairs are announced on the node's change subject.
func newReader(t *testing.T, cfg nodeConfig, nc *nats.Conn, log *slog.Logger) *cache.Reader {
	t.Helper()
	subject := cfg.api.NoticeSubject
	if subject == "" {
		subject = notice.ChangeSubject
	}
	r, err := cache.NewReader(cfg.cache, cfg.fallback, cfg.reader, cache.ReaderDeps{
		Log:     log,
		Publish: func(n notice.Change) error { return notice.Publish(nc, subject, n.Encode()) },
	})
	if err != nil {
		t.Fatalf("cache.NewReader: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

package api_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// The api tests' one harness: a world is a test's own slice of the shared
// services, optionally with the ingest worker that fills the cache, and
// w.node starts API nodes on it (harness_node_test.go). Data reaches the
// cache only as it does in production: matcher messages on NATS, applied by
// the worker (harness_ingest_test.go).

// world is one test's deployment: a migrated database, a Redis key prefix
// (the limiter's and the cache's keys live under it), NATS stream and
// subject names of its own, the key pepper and cursor secret every node
// shares, and the clock they all read. With withIngest it also runs an
// in-process ingest worker on the test's own stream, writing the cache the
// nodes read; model mirrors what was published to it.
type world struct {
	dsn    string
	st     *store.Store
	rdb    *redis.Client // the test's own client; each node has its own
	prefix string
	nc     *nats.Conn // the test's own connection: notices and publishes
	names  testenv.Streams
	pepper []byte
	cursor []byte
	clock  *clock
	client *http.Client

	// Set by withIngest; nil (zero) without a worker.
	js    jetstream.JetStream
	icfg  ingest.Config
	rules cache.Rules
	cache *cache.Cache
	model *rtModel
	seq   int // the last matcher message's number (its JetStream Msg-Id)
}

// worldConfig is what a test may choose of its world.
type worldConfig struct {
	ingest bool
}

type worldOption func(*worldConfig)

// withIngest runs the ingest worker: nodes of the world then serve the data
// routes from the cache it writes.
func withIngest() worldOption { return func(c *worldConfig) { c.ingest = true } }

// newWorld isolates the test on the shared services; everything it creates
// is removed when the test ends.
func newWorld(t testing.TB, opts ...worldOption) *world {
	t.Helper()
	var cfg worldConfig
	for _, o := range opts {
		o(&cfg)
	}
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
	w := &world{
		dsn: dsn, st: store.New(pool), rdb: rdb, prefix: prefix, nc: nc, names: names,
		pepper: randomBytes(32), cursor: randomBytes(32), clock: &clock{},
		client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
	}
	if cfg.ingest {
		w.startIngest(t)
	}
	return w
}

// ingestConfig is ingest's production configuration on the test's own
// names, with batches of at most 200.
func ingestConfig(names testenv.Streams) ingest.Config {
	c := ingest.DefaultConfig()
	c.Stream, c.SubjectPrefix, c.DLQStream = names.Stream, names.SubjectPrefix, names.DLQStream
	c.DLQPrefix, c.NoticeSubject, c.Consumer = names.DLQPrefix, names.NoticeSubject, names.Consumer
	c.BatchSize = 200
	return c
}

// startIngest creates the world's streams and runs an ingest worker on them
// until the test ends, as `marketdata ingest` does.
func (w *world) startIngest(t testing.TB) {
	t.Helper()
	ctx := t.Context()
	var err error
	if w.js, err = jetstream.New(w.nc); err != nil {
		t.Fatal(err)
	}
	w.icfg = ingestConfig(w.names)
	if err := ingest.EnsureStreams(ctx, w.js, w.icfg, nil); err != nil {
		t.Fatal(err)
	}
	w.rules = cache.Rules{Retention: 168 * time.Hour, Now: time.Now}
	w.cache = cache.New(w.rdb, w.prefix, w.rules)
	w.model = rtNewModel()
	// What `marketdata ingest` does at start: an empty store is a complete
	// listing, so /events pages come from Redis.
	if _, _, err := w.cache.EnsureComplete(ctx, w.st); err != nil {
		t.Fatalf("EnsureComplete: %v", err)
	}
	wk, err := ingest.New(w.icfg, ingest.Deps{
		NC: w.nc, Store: w.st, Cache: w.cache, Metrics: ingest.NewMetrics(prometheus.NewRegistry()),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now, Retention: 168 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wk.Run(wctx) }()
	t.Cleanup(func() { // before testenv's cleanup closes nc
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ingest worker: %v", err)
		}
	})
}

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

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails
	return b
}

package ingest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// env is one test's private slice of Postgres, Redis and NATS, wired the way
// `marketdata ingest` wires them.
type env struct {
	dsn    string
	pool   *pgxpool.Pool
	st     *store.Store
	rdb    *redis.Client
	prefix string
	cache  *cache.Cache
	rules  cache.Rules
	nc     *nats.Conn
	js     jetstream.JetStream
	names  testenv.Streams
	cfg    ingest.Config
}

// fixedNow is the clock the tests render with: after every time the
// generator stamps, so that "recently resolved" is stable during a test.
var fixedNow = time.Now().UTC().Add(time.Hour).Truncate(time.Second)

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{dsn: testenv.Database(t)}
	e.rdb, e.prefix = testenv.Redis(t)
	e.nc, e.names = testenv.NATS(t)
	if _, err := store.Migrate(ctx, e.dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	pool, err := store.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool, e.st = pool, store.New(pool)
	e.rules = cache.Rules{Retention: 168 * time.Hour, Now: func() time.Time { return fixedNow }}
	e.cache = cache.New(e.rdb, e.prefix, e.rules)
	if e.js, err = jetstream.New(e.nc); err != nil {
		t.Fatal(err)
	}
	e.cfg = configOf(e.names)
	e.cfg.BatchSize = 200
	if err := ingest.EnsureStreams(ctx, e.js, e.cfg, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

// configOf is the production configuration on the test's own names.
func configOf(names testenv.Streams) ingest.Config {
	c := ingest.DefaultConfig()
	c.Stream, c.SubjectPrefix, c.DLQStream = names.Stream, names.SubjectPrefix, names.DLQStream
	c.DLQPrefix, c.NoticeSubject, c.Consumer = names.DLQPrefix, names.NoticeSubject, names.Consumer
	return c
}

// startWorker runs an in-process worker until the test ends or stop is called.
func (e *env) startWorker(t *testing.T) (stop func()) {
	t.Helper()
	return e.startWorkerMetrics(t, ingest.NewMetrics(prometheus.NewRegistry()))
}

// startWorkerMetrics is startWorker with the test's metrics.
func (e *env) startWorkerMetrics(t *testing.T, m *ingest.Metrics) (stop func()) {
	t.Helper()
	w, err := ingest.New(e.cfg, ingest.Deps{
		NC: e.nc, Store: e.st, Cache: e.cache, Metrics: m,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now, Retention: 168 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// subject is the test's subject for kind and id.
func (e *env) subject(kind, id string) string {
	return e.names.SubjectPrefix + "." + kind + "." + id
}

// publish sends one message and waits for the stream to store it.
func (e *env) publish(t *testing.T, subject string, data []byte, msgID string) {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = data
	if msgID != "" {
		msg.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	if _, err := e.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
}

// waitDrained waits until the consumer has delivered and seen acknowledged
// every stored message.
func (e *env) waitDrained(t *testing.T, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	var pending, ackPending uint64
	for {
		info, err := e.js.Consumer(ctx, e.cfg.Stream, e.cfg.Consumer)
		if err == nil {
			ci, err := info.Info(ctx)
			if err == nil {
				pending, ackPending = ci.NumPending, uint64(ci.NumAckPending)
			}
			if err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Stream > 0 {
				s, err := e.js.Stream(ctx, e.cfg.Stream)
				if err == nil && s.CachedInfo().State.LastSeq <= ci.AckFloor.Stream {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer not drained within %s: %d messages pending, %d delivered and not acknowledged", timeout, pending, ackPending)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dump reads every key under prefix, with the prefix removed, as comparable
// text: strings as is, hashes and zsets as sorted "field=value" lines.
func dump(t *testing.T, rdb *redis.Client, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if strings.HasSuffix(key, "{i}:ok") || strings.Contains(key, "{i}:cursor:") || strings.Contains(key, "{i}:lock:") ||
			strings.HasSuffix(key, "{n}:seq") {
			continue // the rebuild's completion marker, writers' and workers' bookkeeping: not documents
		}
		var val string
		switch typ := rdb.Type(ctx, key).Val(); typ {
		case "hash":
			h := rdb.HGetAll(ctx, key).Val()
			var lines []string
			for _, f := range slices.Sorted(maps.Keys(h)) {
				if f == "q" {
					continue // a price item's change number: which write stored it, not what it holds
				}
				lines = append(lines, f+"="+h[f])
			}
			val = "hash\n" + strings.Join(lines, "\n")
		case "zset":
			zs := rdb.ZRangeWithScores(ctx, key, 0, -1).Val()
			var lines []string
			for _, z := range zs {
				lines = append(lines, fmt.Sprintf("%v=%v", z.Member, z.Score))
			}
			val = "zset\n" + strings.Join(lines, "\n")
		default:
			val = typ + "\n" + rdb.Get(ctx, key).Val()
		}
		out[strings.TrimPrefix(key, prefix)] = val
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffDumps reports the first few differences between two dumps.
func diffDumps(t *testing.T, got, want map[string]string) {
	t.Helper()
	n := 0
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			if n++; n <= 5 {
				t.Errorf("key %s:\n got: %.600s\nwant: %.600s", k, got[k], want[k])
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			if n++; n <= 5 {
				t.Errorf("key %s: present, want absent:\n%.600s", k, got[k])
			}
		}
	}
	if n > 5 {
		t.Errorf("... %d differences in all (%d keys got, %d want)", n, len(got), len(want))
	}
}

// Package testenv gives each test its own slice of the shared local services:
// a fresh Postgres database, a Redis key prefix, and NATS stream and subject
// names, all removed when the test ends. Outside CI a missing service skips
// the test with the reason; with CI=true it fails it. Under `go test -short`
// every helper that needs a service skips the test before dialling anything
// (see Integration), so the short run needs no service at all.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
)

// Addresses of the local services; override with the environment variables
// of the same meaning.
var (
	PostgresURL = envOr("MD_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	RedisURL    = envOr("MD_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	NATSURL     = envOr("MD_TEST_NATS_URL", "nats://127.0.0.1:4222")
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Integration skips the test under `go test -short`: it needs the named
// service (or process), which the short run does without. Every helper here
// that reaches a service calls it first; tests that reach one by another way
// (a child process, their own client) call it themselves. It skips even with
// CI=true: CI runs without -short, so a short run is always a developer's
// choice to leave the integration tests out.
func Integration(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration test: needs %s; run without -short", needs)
	}
}

// Unavailable skips the test, or fails it in CI, because a service is missing.
func Unavailable(t testing.TB, service string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required in CI and does not answer: %v (run deploy/local/services.sh)", service, err)
	}
	t.Skipf("%s does not answer (%v); start it with `make services` to run this test", service, err)
}

// Name returns a short unique lower-case name with the given prefix.
func Name(prefix string) string {
	b := make([]byte, 5)
	rand.Read(b) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b)
}

// Database creates an empty database for the test and returns its URL. The
// database is dropped when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	Integration(t, "PostgreSQL")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, PostgresURL)
	if err != nil {
		Unavailable(t, "PostgreSQL", err)
	}
	defer conn.Close(ctx)
	name := Name("md_test_")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, PostgresURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") //nolint:errcheck // best effort: a leftover test database is dropped by name next time
	})
	cfg, err := pgx.ParseConfig(PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// Redis returns a client and a key prefix of the test's own ("t<hex>:"). Keys
// under the prefix are deleted when the test ends.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	Integration(t, "Redis")
	opt, err := redis.ParseURL(RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		Unavailable(t, "Redis", err)
	}
	prefix := Name("t") + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			rdb.Unlink(ctx, keys[:n]...) // best effort: leftover test keys harm no other test (own prefix)
			keys = keys[n:]
		}
		rdb.Close()
	})
	return rdb, prefix
}

// Streams are NATS names of the test's own. They look nothing like the
// defaults (ingest.DefaultConfig), which testenv cannot import (ingest's
// own tests import testenv): a test that meant its own names but got the
// defaults shows at once.
type Streams struct {
	Stream, SubjectPrefix, DLQStream, DLQPrefix, NoticeSubject, Consumer string
	// KeySubject carries key notices (notice.KeySubject in production),
	// apart from the change notices of NoticeSubject.
	KeySubject string
}

// NATS connects and returns stream and subject names of the test's own;
// the streams are deleted when the test ends.
func NATS(t testing.TB) (*nats.Conn, Streams) {
	t.Helper()
	Integration(t, "NATS")
	nc, err := nats.Connect(NATSURL, nats.Timeout(3*time.Second))
	if err != nil {
		Unavailable(t, "NATS", err)
	}
	keepAccountDir(nc)
	id := Name("t")
	up := strings.ToUpper(id)
	s := Streams{
		Stream:        "MD_" + up,
		SubjectPrefix: id + ".updates",
		DLQStream:     "MD_DLQ_" + up,
		DLQPrefix:     id + ".rejects",
		NoticeSubject: id + ".changes",
		Consumer:      "worker",
		KeySubject:    id + ".keys",
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if js, err := jetstream.New(nc); err == nil {
			js.DeleteStream(ctx, s.Stream)    //nolint:errcheck // best effort: the test may have deleted it
			js.DeleteStream(ctx, s.DLQStream) //nolint:errcheck // best effort: as above
		}
		nc.Close()
	})
	return nc, s
}

// keepStream is a file stream the shared NATS keeps for as long as it runs:
// nats-server (2.9) removes an account's store directory when its last file
// stream is deleted, and a stream created at that moment fails with "error
// creating store for stream" (mkdir …/$G/streams: no such file or
// directory; CI saw it on 2026-11-28 while other packages' tests deleted
// theirs). With this one never deleted, the directory stays.
const keepStream = "MD_TESTENV_KEEP"

// keepAccountDir makes sure keepStream exists (best effort: a failure here
// is the race itself, and the next test's call tries again).
func keepAccountDir(nc *nats.Conn) {
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{ //nolint:errcheck // best effort, see above
		Name: keepStream, Subjects: []string{"mdtestenv.keep"}, Storage: jetstream.FileStorage, MaxMsgs: 1, MaxBytes: 1 << 10,
	})
}

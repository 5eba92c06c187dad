package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// run executes the CLI in-process with env and returns stdout and the error.
func run(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(envOf(env), &out, &errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestMigrateJSON: migrate creates the database, is idempotent, and prints
// one JSON object with --json.
func TestMigrateJSON(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	env := map[string]string{"MD_DATABASE_URL": dsn}
	out, err := run(t, env, "migrate", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		Applied []int `json:"applied"`
		Version int   `json:"version"`
	}
	if err := json.Unmarshal([]byte(out), &first); err != nil || len(first.Applied) == 0 || first.Version != first.Applied[len(first.Applied)-1] {
		t.Fatalf("first migrate: got %q (%v)", out, err)
	}
	out, err = run(t, env, "migrate", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != `{"applied":[],"version":`+jsonInt(first.Version)+`}` {
		t.Errorf("second migrate: got %q, want nothing applied", out)
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestIngestRefusesOldSchema: ingest and cache rebuild will not run on a
// database that was not migrated.
func TestIngestRefusesOldSchema(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	testenv.Redis(t)
	for _, cmd := range [][]string{{"ingest"}, {"cache", "rebuild"}} {
		_, err := run(t, map[string]string{"MD_DATABASE_URL": dsn, "MD_ADMIN_ADDR": "127.0.0.1:0"}, cmd...)
		if err == nil || !strings.Contains(err.Error(), "run `marketdata migrate`") {
			t.Errorf("%v on an unmigrated database: got %v, want a refusal naming migrate", cmd, err)
		}
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := run(t, map[string]string{"MD_DATABASE_URL": dsn}, "migrate"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `INSERT INTO schema_migrations (version, name) VALUES (999, 'future')`); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, map[string]string{"MD_DATABASE_URL": dsn, "MD_ADMIN_ADDR": "127.0.0.1:0"}, "ingest")
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Errorf("ingest on a newer schema: got %v, want a refusal", err)
	}
}

func TestFeedFlagsValidated(t *testing.T) {
	for _, args := range [][]string{
		{"feed", "--events", "0"}, {"feed", "--rate", "-1"}, {"feed", "--duration", "-1s"},
		{"ingest", "--batch-size", "0"}, {"ingest", "--ack-wait", "10ms"},
	} {
		_, err := run(t, nil, args...)
		if err == nil || !strings.HasPrefix(err.Error(), "--") {
			t.Errorf("%v: got %v, want an error naming the flag", args, err)
		}
	}
}

// TestCacheRebuildSendsFlush: `cache rebuild` tells API nodes that the cache
// was rebuilt (a flush notice on --notice-subject), so that they drop what
// they hold from it.
func TestCacheRebuildSendsFlush(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	_, prefix := testenv.Redis(t)
	nc, names := testenv.NATS(t)
	sub, err := nc.SubscribeSync(names.NoticeSubject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MD_DATABASE_URL": dsn, "MD_REDIS_PREFIX": prefix, "MD_NATS_URL": testenv.NATSURL}
	if _, err := run(t, env, "migrate"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, env, "cache", "rebuild", "--json", "--notice-subject", names.NoticeSubject); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no notice after cache rebuild: %v", err)
	}
	var n struct {
		Flush bool `json:"flush"`
	}
	if err := json.Unmarshal(msg.Data, &n); err != nil || !n.Flush {
		t.Errorf("notice after cache rebuild: %s, want {\"flush\":true}", msg.Data)
	}
}

// TestKeepCompleteFlushes: when ingest rebuilds a cache that did not hold
// the whole listing, it sends the flush notice; when nothing was rebuilt, it
// sends none.
func TestKeepCompleteFlushes(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	rdb, prefix := testenv.Redis(t)
	if _, err := run(t, map[string]string{"MD_DATABASE_URL": dsn}, "migrate"); err != nil {
		t.Fatal(err)
	}
	pool, err := store.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	c := cache.New(rdb, prefix, cache.Rules{Retention: time.Hour, Now: time.Now})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// flushes runs keepComplete's first check (the next would come a minute
	// later) and counts the flush notices it sends within wait.
	flushes := func(wait time.Duration) int {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		sent := make(chan struct{}, 10)
		done := make(chan struct{})
		go func() {
			keepComplete(ctx, c, st, func() error { sent <- struct{}{}; return nil }, log)
			close(done)
		}()
		n := 0
		select {
		case <-sent:
			n++
		case <-time.After(wait):
		}
		cancel()
		<-done
		return n + len(sent)
	}
	if n := flushes(10 * time.Second); n != 1 {
		t.Errorf("after rebuilding an empty cache: %d flush notices, want 1", n)
	}
	if ok, err := c.ListingComplete(t.Context()); err != nil || !ok {
		t.Fatalf("listing complete after the rebuild: %v, %v", ok, err)
	}
	if n := flushes(300 * time.Millisecond); n != 0 {
		t.Errorf("with the listing complete: %d flush notices, want 0", n)
	}
}

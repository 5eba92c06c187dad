package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketdata/marketdata/internal/testenv"
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
// was rebuilt (a flush notice on md.changes.v1), so that they drop what they
// hold from it.
func TestCacheRebuildSendsFlush(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	_, prefix := testenv.Redis(t)
	nc, _ := testenv.NATS(t)
	sub, err := nc.SubscribeSync("md.changes.v1")
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
	if _, err := run(t, env, "cache", "rebuild", "--json"); err != nil {
		t.Fatal(err)
	}
	// Other tests' rebuilds may send theirs too: any flush will do, none
	// other than a flush is expected on this subject from this test.
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

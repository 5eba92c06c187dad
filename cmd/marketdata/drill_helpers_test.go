package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/ingest/feed"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/servicetest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// Helpers of the fault drills (drill_test.go): a world of the drill's own
// (database, Redis prefix, stream names; services shared or private), API
// and ingest nodes run in-process or as a subprocess, and probes.

// drill is one drill's configuration.
type drill struct {
	t   *testing.T
	env map[string]string
	ic  ingest.Config
	log *testenv.LogBuffer
}

// newDrill configures a world on the given services with names of its own.
func newDrill(t *testing.T, databaseURL, redisURL, natsURL string) *drill {
	t.Helper()
	id := testenv.Name("d")
	up := strings.ToUpper(id)
	d := &drill{t: t, log: &testenv.LogBuffer{}, env: map[string]string{
		"MD_DATABASE_URL":       databaseURL,
		"MD_REDIS_URL":          redisURL,
		"MD_REDIS_PREFIX":       id + ":",
		"MD_NATS_URL":           natsURL,
		"MD_KEY_PEPPER":         "drill-key-pepper-0123456789abcdef0123",
		"MD_CURSOR_SECRET":      "drill-cursor-secret-0123456789abcdef",
		"MD_HTTP_ADDR":          "127.0.0.1:0",
		"MD_ADMIN_ADDR":         "127.0.0.1:0",
		"MD_RATE_LIMIT":         "1000000",
		"MD_AUTHFAIL_LIMIT":     "1000000",
		"MD_KEY_STALE_MAX":      "10m",
		"MD_DOCS_ORIGIN":        "http://127.0.0.1:1",
		"MD_RESOLVED_RETENTION": "168h",
	}, ic: ingest.DefaultConfig()}
	d.ic.Stream, d.ic.SubjectPrefix = "MD_"+up, id+"."+ingest.DefaultSubjectPrefix
	d.ic.DLQStream, d.ic.DLQPrefix = "MD_DLQ_"+up, id+"."+ingest.DefaultDLQPrefix
	d.ic.NoticeSubject = id + "." + notice.ChangeSubject
	d.ic.BatchSize, d.ic.Linger, d.ic.Appliers, d.ic.AckWait = 500, 5*time.Millisecond, 2, 5*time.Second
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node logs:\n%s", d.log.String())
		}
	})
	return d
}

func (d *drill) config() *Config {
	d.t.Helper()
	cfg, err := LoadConfig(envOf(d.env), secretsRequired)
	if err != nil {
		d.t.Fatalf("config: %v", err)
	}
	return cfg
}

func (d *drill) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(d.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// proc is a node run in-process: its addresses and how to stop it.
type proc struct {
	http, admin string
	stop        func()
}

// startAPI runs an API node in-process; it is stopped when the test ends.
func (d *drill) startAPI() *proc {
	d.t.Helper()
	cfg := d.config()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runAPI(ctx, cfg, d.ic.NoticeSubject, d.logger(), newRegistry(), func(h, a string) { addrs <- [2]string{h, a} })
	}()
	var p *proc
	select {
	case a := <-addrs:
		p = &proc{http: a[0], admin: a[1]}
	case err := <-done:
		cancel()
		d.t.Fatalf("api exited at start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		d.t.Fatal("api not listening 30 s after start")
	}
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					// Not a failure by itself: a drill may have broken what the
					// node needed to stop cleanly. Shown for the reader of the log.
					d.t.Logf("api exited: %v", err)
				}
			case <-time.After(20 * time.Second):
				d.t.Error("api did not stop within 20 s")
			}
		})
	}
	d.t.Cleanup(p.stop)
	return p
}

// startIngest runs an ingest worker in-process; stopped when the test ends.
func (d *drill) startIngest() *proc {
	d.t.Helper()
	cfg := d.config()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runIngest(ctx, cfg, d.ic, d.logger(), newRegistry(), func(a string) { addrs <- a })
	}()
	var p *proc
	select {
	case a := <-addrs:
		p = &proc{admin: a}
	case err := <-done:
		cancel()
		d.t.Fatalf("ingest exited at start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		d.t.Fatal("ingest admin not listening 30 s after start")
	}
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !strings.Contains(err.Error(), "context canceled") {
					d.t.Errorf("ingest: %v", err)
				}
			case <-time.After(20 * time.Second):
				d.t.Error("ingest did not stop within 20 s")
			}
		})
	}
	d.t.Cleanup(p.stop)
	return p
}

// subprocess is a marketdata command run as a child process (this test
// binary re-executed as the CLI, see TestMain).
type subprocess struct{ *servicetest.Proc }

// startProcess runs `marketdata args...` as a child with the drill's
// environment plus extra; it is killed when the test ends.
func (d *drill) startProcess(extra []string, args ...string) *subprocess {
	d.t.Helper()
	env := append(os.Environ(), drillMainEnv+"=1")
	for k, v := range d.env {
		env = append(env, k+"="+v)
	}
	p, err := servicetest.StartProc(servicetest.ProcOptions{Name: args[0], Bin: os.Args[0], Args: args, Env: append(env, extra...), Log: d.log})
	if err != nil {
		d.t.Fatalf("start %s process: %v", args[0], err)
	}
	s := &subprocess{p}
	d.t.Cleanup(s.kill)
	return s
}

// startIngestProcess runs `marketdata ingest` as a child with its admin
// server on adminAddr.
func (d *drill) startIngestProcess(adminAddr string) *subprocess {
	d.t.Helper()
	return d.startProcess([]string{"MD_ADMIN_ADDR=" + adminAddr}, "ingest",
		"--stream", d.ic.Stream, "--subject-prefix", d.ic.SubjectPrefix,
		"--dlq-stream", d.ic.DLQStream, "--dlq-prefix", d.ic.DLQPrefix,
		"--notice-subject", d.ic.NoticeSubject, "--consumer", d.ic.Consumer,
		"--batch-size", "100", "--ack-wait", "5s")
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *subprocess) kill() {
	s.Stop(syscall.SIGKILL, time.Minute) //nolint:errcheck // it ends by kill: the exit status says so
}

// drillMainEnv makes the test binary run as the marketdata CLI.
const drillMainEnv = "MD_DRILL_MAIN"

// TestMain runs the CLI when re-executed by a drill (drillMainEnv set).
func TestMain(m *testing.M) {
	if os.Getenv(drillMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// migrate migrates the drill's database.
func (d *drill) migrate() {
	d.t.Helper()
	if _, err := run(d.t, d.env, "migrate"); err != nil {
		d.t.Fatalf("migrate: %v", err)
	}
}

// newKey creates an account with access and a markets:read key; it returns
// the key's id and secret.
func (d *drill) newKey() (id, secret string) {
	d.t.Helper()
	var acc struct {
		AccountID string `json:"account_id"`
	}
	cliJSON(d.t, d.env, &acc, "account", "create", "--name", "drill")
	var granted map[string]any
	cliJSON(d.t, d.env, &granted, "access", "grant", "--account", acc.AccountID)
	var key createdKey
	cliJSON(d.t, d.env, &key, "key", "create", "--account", acc.AccountID, "--scopes", "markets:read")
	return key.KeyID, key.Secret
}

// feed publishes the synthetic world's first n messages (seeded) and
// returns when JetStream acknowledged them.
func (d *drill) feed(n int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(d.env["MD_NATS_URL"])
	if err != nil {
		d.t.Fatalf("feed: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := ingest.EnsureStreams(ctx, js, d.ic, nil); err != nil {
		d.t.Fatal(err)
	}
	g := feed.NewGenerator(feed.GenConfig{Events: 12, Seed: 7, SubjectPrefix: d.ic.SubjectPrefix})
	st, err := feed.Run(ctx, js, g, feed.RunOptions{MaxMessages: n})
	if err != nil || st.Failed > 0 {
		d.t.Fatalf("feed: %+v, %v", st, err)
	}
}

// caughtUp waits until the ingest consumer has acknowledged every message
// of the stream (so Postgres and Redis hold them).
func (d *drill) caughtUp(within time.Duration) {
	d.t.Helper()
	nc, err := nats.Connect(d.env["MD_NATS_URL"])
	if err != nil {
		d.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var last string
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cons, err := js.Consumer(ctx, d.ic.Stream, d.ic.Consumer)
		if err == nil {
			var info *jetstream.ConsumerInfo
			if info, err = cons.Info(ctx); err == nil {
				if info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream > 0 {
					cancel()
					return
				}
				last = fmt.Sprintf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
			}
		}
		if err != nil {
			last = err.Error()
		}
		cancel()
		time.Sleep(50 * time.Millisecond) // polling the consumer's state
	}
	d.t.Fatalf("ingest not caught up within %s: %s", within, last)
}

// publishPrices publishes price versions from..to of each market, version
// by version (every market's version v before any v+1), each with its own
// Nats-Msg-Id. It returns the first error.
func (d *drill) publishPrices(ctx context.Context, markets []string, from, to int) error {
	nc, err := nats.Connect(d.env["MD_NATS_URL"])
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return err
	}
	if err := ingest.EnsureStreams(ctx, js, d.ic, nil); err != nil {
		return err
	}
	for v := from; v <= to; v++ {
		for _, m := range markets {
			body := fmt.Sprintf(`{"market_id":%q,"version":%d,"ts":%q,"quotes":{"venue_a":{"bid":0.4,"ask":0.6,"last":0.5,"volume_24h":%d}}}`,
				m, v, time.Now().UTC().Format(time.RFC3339Nano), v)
			msg := &nats.Msg{Subject: d.ic.SubjectPrefix + ".price." + m, Data: []byte(body), Header: nats.Header{}}
			msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", m, v))
			if _, err := js.PublishMsgAsync(msg); err != nil {
				return fmt.Errorf("publish %s v%d: %w", m, v, err)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// priceVersions returns the stored version of each market's price.
func priceVersions(t *testing.T, dsn string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT market_id, version FROM prices`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		out[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// drillMarkets are market ids of a drill's own price messages.
func drillMarkets(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("drill-m%02d", i)
	}
	return out
}

package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/api/edge"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// freeAddr is a loopback address nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	return testenv.ClosedPort(t) // below the ephemeral range (testenv.FreePort)
}

// devArgs are the arguments of a dev run on the test's own streams.
func devArgs(names testenv.Streams, state string) []string {
	return []string{"dev", "--state", state, "--events", "3", "--rate", "5",
		"--stream", names.Stream, "--subject-prefix", names.SubjectPrefix, "--dlq-stream", names.DLQStream,
		"--dlq-prefix", names.DLQPrefix, "--notice-subject", names.NoticeSubject}
}

// ask asks url with the key (none when empty) and an Origin (none when
// empty) and returns the answer, its body drained.
func ask(t *testing.T, method, url, key, origin string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "authorization")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestDevFirstRun runs `marketdata dev` as a newcomer would on this
// machine: no WARN line at start; the banner names the API's admin address
// and the dev-only settings; more than MD_AUTHFAIL_LIMIT bad keys from
// loopback do not lock the demo key out; the docs origin (CORS) follows
// MD_DOCS_ADDR.
func TestDevFirstRun(t *testing.T) {
	env := devEnv(t)
	_, names := testenv.NATS(t)
	docsAddr := freeAddr(t)
	env["MD_HTTP_ADDR"], env["MD_ADMIN_ADDR"], env["MD_DOCS_ADDR"] = "127.0.0.1:0", "127.0.0.1:0", docsAddr
	out, logs := &testenv.LogBuffer{}, &testenv.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRoot(envOf(env), out, logs)
		root.SetArgs(devArgs(names, filepath.Join(t.TempDir(), "dev.json")))
		done <- root.ExecuteContext(ctx)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("dev exited with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("dev did not stop 30 s after Ctrl-C")
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nlogs:\n%s", out.String(), logs.String())
		}
	}()
	curl := regexp.MustCompile(`curl -s -H 'Authorization: Bearer (mdk_live_[A-Za-z0-9_-]{43})' (http://[0-9.:]+/public/v1/key)`)
	var key, url string
	for deadline := time.Now().Add(60 * time.Second); ; {
		if m := curl.FindStringSubmatch(out.String()); m != nil {
			key, url = m[1], m[2]
			break
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("dev exited before its banner: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no banner 60 s after start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	banner := out.String()
	// Warnings are logged as the servers start, before the banner; what
	// follows (requests on a busy machine) may warn for its own reasons.
	startLogs := logs.String()
	if !regexp.MustCompile(`\(admin http://127\.0\.0\.1:[1-9][0-9]*,`).MatchString(banner) {
		t.Errorf("the banner does not name the API's admin address")
	}
	if !strings.Contains(banner, "marketdata key create --dev --scopes markets:read --state ") {
		t.Errorf("the banner does not say how to make more keys in dev's database")
	}
	if !strings.Contains(banner, "dev settings:    failed-auth limit off for loopback clients; docs origin http://"+docsAddr) {
		t.Errorf("the banner does not name the dev-only settings")
	}

	// More bad keys than MD_AUTHFAIL_LIMIT (20) from 127.0.0.1: each a 401,
	// never a 429, and the demo key still answers.
	for i := range 25 {
		if r := ask(t, http.MethodGet, url, store.NewSecret(), ""); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bad key %d from loopback: got %d, want 401", i+1, r.StatusCode)
		}
	}
	if r := ask(t, http.MethodGet, url, key, ""); r.StatusCode != http.StatusOK {
		t.Errorf("the demo key after 25 bad ones from loopback: got %d, want 200", r.StatusCode)
	}

	// The docs site moved to docsAddr: the API allows its origin.
	origin := "http://" + docsAddr
	r := ask(t, http.MethodOptions, url, "", origin)
	if r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("preflight from the docs site %s: got %d, Access-Control-Allow-Origin %q; want 204 allowing it",
			origin, r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	// The same site opened as localhost.
	local := strings.Replace(origin, "127.0.0.1", "localhost", 1)
	if r := ask(t, http.MethodOptions, url, "", local); r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != local {
		t.Errorf("preflight from the docs site as %s: got %d, Access-Control-Allow-Origin %q; want 204 allowing it",
			local, r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}

	for line := range strings.SplitSeq(startLogs, "\n") {
		if strings.Contains(line, `"level":"WARN"`) {
			t.Errorf("dev warned on a clean start: %s", line)
		}
	}
}

// TestAPILocksOutLoopback: `marketdata api` keeps the contract's limit for
// every address, loopback included: after MD_AUTHFAIL_LIMIT (default 20)
// failed authentications, the next request from 127.0.0.1 gets 429, even
// with a valid key. (api's TestLimitFailedAuthAcrossNodes holds the
// limit's details, from loopback too.)
func TestAPILocksOutLoopback(t *testing.T) {
	_, prefix := testenv.Redis(t)
	d := newDrill(t, testenv.Database(t), testenv.RedisURL, testenv.NATSURL)
	d.env["MD_REDIS_PREFIX"] = prefix
	delete(d.env, "MD_AUTHFAIL_LIMIT") // the production default
	d.migrate()
	_, secret := d.newKey()
	url := "http://" + d.startAPI().http + "/public/v1/key"
	for i := range 20 {
		if r := ask(t, http.MethodGet, url, store.NewSecret(), ""); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bad key %d: got %d, want 401", i+1, r.StatusCode)
		}
	}
	for _, k := range []string{store.NewSecret(), secret} {
		if r := ask(t, http.MethodGet, url, k, ""); r.StatusCode != http.StatusTooManyRequests {
			t.Errorf("after 20 bad keys from loopback: got %d, want 429", r.StatusCode)
		}
	}
}

// TestDevBusyPortPublishesNothing: a dev whose port is taken (by a first
// dev, say) fails naming the address and the variable that moves it,
// before it migrates, writes its state or publishes anything.
func TestDevBusyPortPublishesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, name := range []string{"MD_HTTP_ADDR", "MD_ADMIN_ADDR", "MD_DOCS_ADDR"} {
		t.Run(name, func(t *testing.T) {
			env := devEnv(t)
			nc, names := testenv.NATS(t)
			env["MD_HTTP_ADDR"], env["MD_ADMIN_ADDR"], env["MD_DOCS_ADDR"] = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
			env[name] = busy.Addr().String()
			state := filepath.Join(t.TempDir(), "dev.json")
			_, err := run(t, env, devArgs(names, state)...)
			if err == nil || !strings.HasPrefix(err.Error(), name+": "+busy.Addr().String()+" is in use") ||
				!strings.Contains(err.Error(), "set "+name) {
				t.Errorf("got %v; want a refusal naming %s and %s", err, name, busy.Addr())
			}
			if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the state file was written (%v): dev went on past the busy port", err)
			}
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.Stream(context.Background(), names.Stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("stream %s: got %v, want none: dev published past the busy port", names.Stream, err)
			}
		})
	}
}

// TestApplyDevSettings: dev's own settings, and none of them where the
// environment says otherwise.
func TestApplyDevSettings(t *testing.T) {
	load := func(env map[string]string) *Config {
		t.Helper()
		cfg, err := LoadConfig(envOf(env), secretsUnused)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	raise := func(n uint64) func() (uint64, error) { return func() (uint64, error) { return n, nil } }

	cfg := load(nil)
	notes, err := applyDevSettings(cfg, envOf(nil), "0.0.0.0:8082", raise(20000))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DocsOrigin != "http://127.0.0.1:8082" {
		t.Errorf("docs origin: got %q, want http://127.0.0.1:8082 (MD_DOCS_ADDR as a browser here reaches it)", cfg.DocsOrigin)
	}
	if !slices.Contains(cfg.AppOrigins, "http://localhost:8082") || !notes.alsoLocalhost {
		t.Errorf("allowed origins %v: want the docs site as localhost too (a browser opened on localhost sends that)", cfg.AppOrigins)
	}
	if !slices.Equal(cfg.AuthFailExempt, loopback) {
		t.Errorf("failed-auth exemption: got %v, want loopback", cfg.AuthFailExempt)
	}
	if want := edge.FitConns(20000, 20000); cfg.MaxConns != want || want >= 20000 || notes.nofile != 20000 {
		t.Errorf("MD_MAX_CONNS under a limit of 20000: got %d (notes %+v), want %d", cfg.MaxConns, notes, want)
	}

	env := map[string]string{"MD_DOCS_ORIGIN": "https://docs.example.com", "MD_MAX_CONNS": "100"}
	cfg = load(env)
	notes, err = applyDevSettings(cfg, envOf(env), "127.0.0.1:8082", raise(20000))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DocsOrigin != "https://docs.example.com" || cfg.MaxConns != 100 || notes.nofile != 0 || len(cfg.AppOrigins) != 0 {
		t.Errorf("set in the environment: got origin %q, MD_MAX_CONNS %d; want them kept", cfg.DocsOrigin, cfg.MaxConns)
	}

	// Production: nothing of the above.
	if cfg := load(nil); cfg.AuthFailExempt != nil || cfg.DocsOrigin != "http://127.0.0.1:8081" || cfg.MaxConns != 20000 || len(cfg.AppOrigins) != 0 {
		t.Errorf("api's configuration changed: exempt %v, origin %q, MD_MAX_CONNS %d", cfg.AuthFailExempt, cfg.DocsOrigin, cfg.MaxConns)
	}
}

// TestFeedStoppedWhileSettingUpIsAStop: Ctrl-C while the feed is still
// creating its streams (a slow NATS, or a stop right after the start) ends
// the feed without an error, as a stop at any later moment does; dev once
// exited with "ingest: stream …: context canceled" that way.
func TestFeedStoppedWhileSettingUpIsAStop(t *testing.T) {
	_, names := testenv.NATS(t)
	ic := ingest.DefaultConfig()
	ic.Stream, ic.SubjectPrefix, ic.DLQStream, ic.DLQPrefix = names.Stream, names.SubjectPrefix, names.DLQStream, names.DLQPrefix
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := runFeed(ctx, testenv.NATSURL, ic, feedOptions{events: 3, rate: 5}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("feed stopped during setup: %v, want no error", err)
	}
}

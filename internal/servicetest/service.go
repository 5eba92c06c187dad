package servicetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// Fixed secrets of every test service: tests may compute cursors or key
// hashes with them, and nothing they protect outlives the test.
const (
	KeyPepper    = "servicetest-key-pepper-0123456789abcdef"
	CursorSecret = "servicetest-cursor-secret-0123456789ab"
)

// DefaultWaitTimeout bounds every wait of a Service (readiness, a message
// served): generous, as the CI machine is loaded.
const DefaultWaitTimeout = 60 * time.Second

// Options configure Start.
type Options struct {
	// APINodes is the number of API nodes (default 1).
	APINodes int
	// Env is added to the environment of every child process and CLI run,
	// over the defaults: MD_RATE_LIMIT (default 1000000), MD_RATE_WINDOW,
	// MD_AUTHFAIL_LIMIT (default 1000000), MD_KEY_STALE_MAX, ... The
	// world's names (database, Redis prefix) and the addresses are set by
	// Start and cannot be overridden.
	Env map[string]string
	// WaitTimeout bounds each wait (default DefaultWaitTimeout).
	WaitTimeout time.Duration
	// IngestWorkers is the number of ingest workers sharing the consumer
	// (default 1).
	IngestWorkers int
}

// Service is one running marketdata world of the test's own.
type Service struct {
	t    testing.TB
	bin  string
	env  []string // the children's environment, complete
	wait time.Duration

	// DatabaseURL, RedisPrefix and Names are the world's own.
	DatabaseURL string
	RedisPrefix string
	Names       testenv.Streams
	// APIs are the API nodes, Ingest the (first) ingest worker, Ingests
	// every ingest worker.
	APIs    []*Node
	Ingest  *Node
	Ingests []*Node

	nc *nats.Conn
	js jetstream.JetStream

	mu       sync.Mutex
	versions map[string]int64 // kind + "." + id → the last version published
	observer string           // secret of the key the waits read with
	hc       *http.Client
}

// Start migrates a fresh database and runs one ingest worker and
// opts.APINodes API nodes, all ready (/readyz 200) when it returns. All are
// killed when the test ends; their logs are shown if the test failed.
func Start(t testing.TB, opts Options) *Service {
	t.Helper()
	testenv.Integration(t, "PostgreSQL, Redis, NATS and the marketdata binary")
	if opts.APINodes == 0 {
		opts.APINodes = 1
	}
	if opts.WaitTimeout == 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	dbURL := testenv.Database(t)
	_, prefix := testenv.Redis(t)
	nc, names := testenv.NATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("servicetest: jetstream: %v", err)
	}
	s := &Service{
		t: t, bin: Binary(t), wait: opts.WaitTimeout,
		DatabaseURL: dbURL, RedisPrefix: prefix, Names: names,
		nc: nc, js: js, versions: map[string]int64{},
		hc: &http.Client{Timeout: 10 * time.Second},
	}
	vars := map[string]string{
		"MD_RATE_LIMIT":         "1000000",
		"MD_RATE_WINDOW":        "60s",
		"MD_AUTHFAIL_LIMIT":     "1000000",
		"MD_AUTHFAIL_WINDOW":    "300s",
		"MD_KEY_STALE_MAX":      "10m",
		"MD_RESOLVED_RETENTION": "168h",
		"MD_DOCS_ORIGIN":        "http://127.0.0.1:1",
		"MD_STREAM_REPLICAS":    "1",
	}
	for k, v := range opts.Env {
		vars[k] = v
	}
	vars["MD_DATABASE_URL"] = dbURL
	vars["MD_REDIS_URL"] = testenv.RedisURL
	vars["MD_REDIS_PREFIX"] = prefix
	vars["MD_NATS_URL"] = testenv.NATSURL
	vars["MD_KEY_PEPPER"] = KeyPepper
	vars["MD_CURSOR_SECRET"] = CursorSecret
	// The children see none of the developer's own MD_ variables.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MD_") {
			s.env = append(s.env, kv)
		}
	}
	for k, v := range vars {
		s.env = append(s.env, k+"="+v)
	}

	if _, err := s.CLI("migrate"); err != nil {
		t.Fatalf("servicetest: %v", err)
	}
	for i := range max(opts.IngestWorkers, 1) {
		name := "ingest"
		if i > 0 {
			name += strconv.Itoa(i + 1)
		}
		s.Ingests = append(s.Ingests, s.newNode(name, false, "ingest",
			"--stream", names.Stream, "--subject-prefix", names.SubjectPrefix,
			"--dlq-stream", names.DLQStream, "--dlq-prefix", names.DLQPrefix,
			"--notice-subject", names.NoticeSubject, "--consumer", names.Consumer,
			"--ack-wait", "5s"))
	}
	s.Ingest = s.Ingests[0]
	for i := range opts.APINodes {
		s.APIs = append(s.APIs, s.newNode("api"+strconv.Itoa(i+1), true, "api", "--notice-subject", names.NoticeSubject))
	}
	t.Cleanup(func() {
		for _, n := range append(slices.Clone(s.Ingests), s.APIs...) {
			n.kill()
		}
		if t.Failed() {
			for _, n := range append(slices.Clone(s.Ingests), s.APIs...) {
				t.Logf("servicetest: log of %s (%s):\n%s", n.Name, n.AdminAddr, n.tail())
			}
		}
	})
	// The ingest worker creates the streams: start it first so the API
	// nodes' notice subscriptions find a world already in place.
	for _, n := range s.Ingests {
		n.Start()
	}
	for _, n := range s.APIs {
		n.Start()
	}
	s.observer = s.NewKey("markets:read").Secret
	return s
}

// Env is the environment every child process of the world runs with (a
// copy): the world's database, Redis prefix, NATS and secrets. A test that
// starts processes of its own in the world (deploy/local/lb.sh's nodes)
// gives them this.
func (s *Service) Env() []string { return slices.Clone(s.env) }

// URL is the base URL of the first API node ("http://127.0.0.1:port").
func (s *Service) URL() string { return s.APIs[0].URL() }

// CLI runs `marketdata args...` in the world's environment and returns its
// standard output; an error carries its standard error.
func (s *Service) CLI(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.wait)
	defer cancel()
	cmd := execCommand(ctx, s.bin, args...)
	cmd.Env = s.env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("marketdata %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// CLIJSON runs `marketdata args... --json` and decodes its one JSON object
// into v; it fails the test on any error.
func (s *Service) CLIJSON(v any, args ...string) {
	s.t.Helper()
	out, err := s.CLI(append(args, "--json")...)
	if err != nil {
		s.t.Fatalf("servicetest: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(v); err != nil || dec.More() {
		s.t.Fatalf("servicetest: marketdata %s --json: got %q, want one JSON object (%v)", strings.Join(args, " "), out, err)
	}
}

// Key is a key `marketdata key create --json` printed, with its account
// (which CreateKey fills in).
type Key struct {
	store.KeyFields
	Secret string `json:"secret"`
}

// AllScopes are the scopes a key can have.
var AllScopes = []string{"markets:read", "account:read", "stream:read"}

// NewAccount creates an account with access granted and returns its id.
func (s *Service) NewAccount(name string) string {
	s.t.Helper()
	var acc struct {
		AccountID string `json:"account_id"`
	}
	s.CLIJSON(&acc, "account", "create", "--name", name)
	s.GrantAccess(acc.AccountID)
	return acc.AccountID
}

// NewKey creates an account with access and a key of it with the scopes
// (AllScopes when none are given).
func (s *Service) NewKey(scopes ...string) Key {
	s.t.Helper()
	return s.CreateKey(s.NewAccount(testenv.Name("acct-")), scopes...)
}

// CreateKey creates a key of the account with the scopes (AllScopes when
// none are given). Further flags of `key create` go in as scopes would not:
// use CLIJSON for them.
func (s *Service) CreateKey(accountID string, scopes ...string) Key {
	s.t.Helper()
	if len(scopes) == 0 {
		scopes = AllScopes
	}
	var k Key
	s.CLIJSON(&k, "key", "create", "--account", accountID, "--scopes", strings.Join(scopes, ","))
	k.AccountID = accountID
	return k
}

// RevokeKey revokes a key (`marketdata key revoke`).
func (s *Service) RevokeKey(keyID string) {
	s.t.Helper()
	var rec map[string]any
	s.CLIJSON(&rec, "key", "revoke", "--key", keyID)
}

// GrantAccess grants an account API access.
func (s *Service) GrantAccess(accountID string) {
	s.t.Helper()
	var rec map[string]any
	s.CLIJSON(&rec, "access", "grant", "--account", accountID)
}

// WithdrawAccess withdraws an account's API access.
func (s *Service) WithdrawAccess(accountID string) {
	s.t.Helper()
	var rec map[string]any
	s.CLIJSON(&rec, "access", "withdraw", "--account", accountID)
}

func execCommand(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

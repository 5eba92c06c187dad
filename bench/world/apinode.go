package world

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/marketdata/marketdata/store"
)

// benchPepper configures the API node under test.
var benchPepper = strings.Repeat("p", 32)

// APINode is `marketdata api` as a child process on a sandbox database with
// one account and key.
type APINode struct {
	*Child
	// Addr is the API's host:port, the one the node bound on port 0.
	Addr   string
	Secret string
}

// StartAPINode creates an account with access and a key with every scope
// in the sandbox database dsn, and starts `marketdata api` on it; env adds
// to (and overrides) its environment.
func StartAPINode(ctx context.Context, o *Options, sb *Sandbox, dsn, logPath string, env ...string) (*APINode, error) {
	secrets, err := CreateBenchKeys(ctx, dsn, 1, 1)
	if err != nil {
		return nil, err
	}
	n, err := StartAPIChild(ctx, o, sb, dsn, logPath, env...)
	if err != nil {
		return nil, err
	}
	n.Secret = secrets[0]
	return n, nil
}

// CreateBenchKeys creates n accounts with access, each with one key of
// every scope, workers at a time, and returns the keys' secrets.
func CreateBenchKeys(ctx context.Context, dsn string, n, workers int) ([]string, error) {
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	st := store.New(pool)
	secrets := make([]string, n)
	errs := make(chan error, workers)
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		go func() {
			var first error
			for i := range next {
				if first == nil {
					secrets[i], first = createBenchKey(ctx, st, fmt.Sprintf("bench-%d", i))
				}
			}
			errs <- first
		}()
	}
	for range workers {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	return secrets, err
}

// createBenchKey creates one account with access and a key of every scope.
func createBenchKey(ctx context.Context, st *store.Store, name string) (string, error) {
	now := time.Now()
	a, err := st.CreateAccount(ctx, name, now)
	if err != nil {
		return "", err
	}
	if _, err := st.SetAccess(ctx, a.ID, true, now); err != nil {
		return "", err
	}
	secret := store.NewSecret()
	if _, err := st.CreateKey(ctx, store.NewKey{
		AccountID: a.ID, SecretHash: store.HashSecret([]byte(benchPepper), secret), Last4: secret[len(secret)-4:],
		Scopes: store.KnownScopes, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour),
	}); err != nil {
		return "", err
	}
	return secret, nil
}

// StartAPIChild starts `marketdata api` on the sandbox database dsn,
// following the sandbox's change notices, with a rate limit no benchmark
// reaches; its Secret is left empty.
func StartAPIChild(ctx context.Context, o *Options, sb *Sandbox, dsn, logPath string, env ...string) (*APINode, error) {
	args := []string{"api", "--notice-subject", sb.Ingest.NoticeSubject}
	if !o.Usage {
		args = append(args, "--usage=false")
	}
	// Port 0: the node binds a port of the kernel's choosing and logs it,
	// so no other process can take it between a pick and the bind.
	child, err := startChild(ctx, o.Bin, args, append([]string{
		"MD_HTTP_ADDR=127.0.0.1:0", "MD_DATABASE_URL=" + dsn, "MD_REDIS_URL=" + o.RedisURL,
		"MD_REDIS_PREFIX=" + sb.Prefix, "MD_NATS_URL=" + o.NATSURL,
		"MD_KEY_PEPPER=" + benchPepper, "MD_CURSOR_SECRET=" + strings.Repeat("c", 32),
		// The window runs on every request, but must not refuse the load.
		"MD_RATE_LIMIT=1000000000", "MD_RATE_WINDOW=3600s",
	}, env...), logPath, true)
	if err != nil {
		return nil, fmt.Errorf("start api: %w", err)
	}
	return &APINode{Child: child, Addr: child.proc.HTTP}, nil
}

// Get fetches path once with the node's key and returns the body.
func (n *APINode) Get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.Addr+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+n.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d: %s", path, resp.StatusCode, body)
	}
	return body, err
}

// StopNode stops an API child for a deferred call: its stop error changes
// no figure, so it is logged.
func StopNode(n *APINode, log *slog.Logger) {
	if err := n.Stop(10 * time.Second); err != nil {
		log.Warn("api stop", "pid", n.Pid(), "err", err)
	}
}

// KeyWorkers create a benchmark's many keys in parallel.
const KeyWorkers = 8

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/marketdata/marketdata/store"
)

// goalKeyRatio: GET /public/v1/key through the full middleware must reach at
// least this share of a bare Fiber handler's throughput.
const goalKeyRatio = 0.35

// benchPepper configures the API node under test.
var benchPepper = strings.Repeat("p", 32)

// HTTPCompare is one route against the bare baseline, in alternating rounds.
type HTTPCompare struct {
	Route     string       `json:"route"`
	API       []LoadResult `json:"api_rounds"`
	Bare      []LoadResult `json:"bare_rounds"`
	APIRPS    float64      `json:"api_rps_mean"`
	BareRPS   float64      `json:"bare_rps_mean"`
	Ratios    []float64    `json:"round_ratios"`
	Ratio     float64      `json:"ratio_median"`
	Goal      float64      `json:"ratio_goal"`
	Met       bool         `json:"ratio_goal_met"`
	BodyBytes int          `json:"body_bytes"`
}

// KeyResult is bench-results/key.json.
type KeyResult struct {
	Bench    string      `json:"bench"`
	Machine  Machine     `json:"machine"`
	Compare  HTTPCompare `json:"compare"`
	ChildLog string      `json:"child_log"`
}

// APINode is `marketdata api` as a child process on a sandbox database with
// one account and key.
type APINode struct {
	*Child
	Addr   string
	Secret string
}

// StartAPINode migrates a sandbox database, creates an account with access
// and a key with every scope, and starts `marketdata api` on it.
func StartAPINode(ctx context.Context, o *Options, sb *Sandbox, dsn, logPath string) (*APINode, error) {
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	st := store.New(pool)
	now := time.Now()
	a, err := st.CreateAccount(ctx, "bench", now)
	if err != nil {
		return nil, err
	}
	if _, err := st.SetAccess(ctx, a.ID, true, now); err != nil {
		return nil, err
	}
	secret := store.NewSecret()
	if _, err := st.CreateKey(ctx, store.NewKey{
		AccountID: a.ID, SecretHash: store.HashSecret([]byte(benchPepper), secret), Last4: secret[len(secret)-4:],
		Scopes: store.KnownScopes, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour),
	}); err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	child, err := StartChild(ctx, o.Bin, []string{"api"}, []string{
		"MD_HTTP_ADDR=" + addr, "MD_DATABASE_URL=" + dsn, "MD_REDIS_URL=" + o.RedisURL,
		"MD_REDIS_PREFIX=" + sb.Prefix, "MD_NATS_URL=" + o.NATSURL,
		"MD_KEY_PEPPER=" + benchPepper, "MD_CURSOR_SECRET=" + strings.Repeat("c", 32),
		// The window runs on every request, but must not refuse the load.
		"MD_RATE_LIMIT=1000000000", "MD_RATE_WINDOW=3600s",
	}, logPath)
	if err != nil {
		return nil, fmt.Errorf("start api: %w", err)
	}
	return &APINode{Child: child, Addr: addr, Secret: secret}, nil
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

// compare loads the API route and a bare Fiber handler serving the same
// bytes, alternately for rounds rounds each, with 64 connections.
func compare(ctx context.Context, o *Options, n *APINode, path string, goal float64, log *slog.Logger) (HTTPCompare, error) {
	body, err := n.Get(ctx, path)
	if err != nil {
		return HTTPCompare{}, err
	}
	bare, err := StartBare(ctx, body, o.Out)
	if err != nil {
		return HTTPCompare{}, err
	}
	defer bare.Stop()
	const conns, rounds = 64, 3
	warm, d := 2*time.Second, 8*time.Second
	res := HTTPCompare{Route: path, Goal: goal, BodyBytes: len(body)}
	for r := range rounds {
		b, err := Load(ctx, Target{Addr: bare.Addr, Path: path, Status: 200}, conns, warm, d)
		if err != nil {
			return res, fmt.Errorf("bare: %w", err)
		}
		a, err := Load(ctx, Target{Addr: n.Addr, Path: path, Status: 200,
			Headers: map[string]string{"Authorization": "Bearer " + n.Secret}}, conns, warm, d)
		if err != nil {
			return res, fmt.Errorf("api: %w", err)
		}
		log.Info("round", "route", path, "round", r+1, "bare_rps", b.RPS, "api_rps", a.RPS, "api_p99_ms", a.P99MS)
		res.Bare, res.API = append(res.Bare, b), append(res.API, a)
		res.Ratios = append(res.Ratios, round2(a.RPS/b.RPS))
	}
	// The machine is shared by the server, its dependencies and the load
	// generator: rounds vary. Each round pairs a bare run with an API run
	// right after it; the median of the round ratios is the figure.
	for i := range res.API {
		res.BareRPS += res.Bare[i].RPS / rounds
		res.APIRPS += res.API[i].RPS / rounds
	}
	res.BareRPS, res.APIRPS = round2(res.BareRPS), round2(res.APIRPS)
	sorted := slices.Clone(res.Ratios)
	slices.Sort(sorted)
	res.Ratio = sorted[len(sorted)/2]
	res.Met = res.Ratio >= goal
	return res, nil
}

func runKeyBench(ctx context.Context, o *Options, log *slog.Logger) (any, error) {
	sb, err := NewSandbox(ctx, o, log)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	dsn, err := sb.Database(ctx, "api")
	if err != nil {
		return nil, err
	}
	res := &KeyResult{Bench: "key", Machine: o.Machine, ChildLog: filepath.Join(o.Out, "key-child.log")}
	node, err := StartAPINode(ctx, o, sb, dsn, res.ChildLog)
	if err != nil {
		return nil, err
	}
	defer node.Stop(10 * time.Second) //nolint:errcheck
	if res.Compare, err = compare(ctx, o, node, "/public/v1/key", goalKeyRatio, log); err != nil {
		return nil, err
	}
	printCompare(o.Machine, []HTTPCompare{res.Compare})
	return res, nil
}

func printCompare(m Machine, cs []HTTPCompare) {
	fmt.Printf("\nHTTP benchmark — %d cores, %s, %s, 64 connections over loopback, bare Fiber baseline in the same run\n",
		m.NumCPU, m.GoVersion, m.Date.Format("2006-01-02 15:04 MST"))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "route\tapi rps\tapi p50/p99 ms\tbare rps\tbare p50/p99 ms\tround ratios\tmedian\tgoal")
	for _, c := range cs {
		last := len(c.API) - 1
		fmt.Fprintf(w, "%s\t%.0f\t%.2f / %.2f\t%.0f\t%.2f / %.2f\t%v\t%.2f\t≥ %.2f %s\n", c.Route,
			c.APIRPS, c.API[last].P50MS, c.API[last].P99MS, c.BareRPS, c.Bare[last].P50MS, c.Bare[last].P99MS,
			c.Ratios, c.Ratio, c.Goal, met(c.Met))
	}
	w.Flush()
}

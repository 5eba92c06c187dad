// Package idle is the idle benchmark: snapshot reads with and without 10,000
// idle keep-alive connections open, the node at MD_MAX_CONNS, and its RSS
// with them.
package idle

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/marketdata/marketdata/bench/baseline"
	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// The idle benchmark: a node at MD_MAX_CONNS, most of its connections idle
// keep-alive clients, still serves the snapshot at nearly its full rate.
const (
	idleConns = 10_000
	// idleEvents is the world of this benchmark: the snapshot reads 50
	// markets of it; its size changes nothing of the edge.
	idleEvents = 5_000
	// goalIdleRatio: the snapshot rate with the idle connections open, over
	// the rate without them.
	goalIdleRatio = 0.9
	// idleDialers open the idle connections in parallel.
	idleDialers = 32
)

// idlePlan: each run is a warm-up and a measured run; the idle connections
// are opened for one run and closed after it, well inside the node's 60 s
// idle timeout. The machine is shared: the median of 5 round ratios counts.
var idlePlan = baseline.LoadPlan{Conns: 64, Rounds: 5, Warmup: 2 * time.Second, Duration: 8 * time.Second}

// IdleRound is one pair of snapshot runs, without and then with the idle
// connections open.
type IdleRound struct {
	Without measure.LoadResult `json:"without_idle"`
	With    measure.LoadResult `json:"with_idle"`
	Ratio   float64            `json:"ratio"`
	// OpenSeconds is how long opening the idle connections took.
	OpenSeconds float64 `json:"open_seconds"`
	// OpenReported is the node's marketdata_http_connections_open after the
	// run with them: they were all still open.
	OpenReported float64         `json:"open_reported_after_run"`
	MemWith      measure.ProcMem `json:"api_mem_with_idle"`
	MemWithout   measure.ProcMem `json:"api_mem_without_idle"`
}

// IdleResult is bench-results/idle.json.
type IdleResult struct {
	Bench      string        `json:"bench"`
	Machine    world.Machine `json:"machine"`
	MaxConns   int           `json:"md_max_conns"`
	IdleConns  int           `json:"idle_connections"`
	Route      string        `json:"route"`
	Rounds     []IdleRound   `json:"rounds"`
	RPSWithout float64       `json:"rps_without_mean"`
	RPSWith    float64       `json:"rps_with_mean"`
	Ratio      float64       `json:"ratio_median"`
	Goal       float64       `json:"ratio_goal"`
	Met        bool          `json:"ratio_goal_met"`
	// MemWith is the node's memory with the idle connections open (the last
	// round's), MemWithout right before they were opened.
	MemWith    measure.ProcMem `json:"api_mem_with_idle"`
	MemWithout measure.ProcMem `json:"api_mem_without_idle"`
	Failed     int64           `json:"requests_failed"`
	Warnings   map[string]int  `json:"child_warnings"`
	ChildLog   string          `json:"child_log"`
	Seconds    float64         `json:"seconds"`
}

func Run(ctx context.Context, o *world.Options, log *slog.Logger) (any, error) {
	began := time.Now()
	maxConns := idleConns + idlePlan.Conns
	// This process holds the idle connections; the node holds their other
	// ends (a Go child raises its own soft limit to the hard one).
	if err := measure.RaiseFileLimit(uint64(idleConns + 1024)); err != nil {
		return nil, err
	}
	res := &IdleResult{Bench: "idle", Machine: o.Machine, MaxConns: maxConns, IdleConns: idleConns,
		Goal: goalIdleRatio, ChildLog: filepath.Join(o.Out, "idle-child.log")}
	w := world.NewReadsWorld(idleEvents, world.ReadsPerEvent, world.ReadsSeed)
	sb, dsn, _, err := world.OpenLoaded(ctx, o, log, "idle", w)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	node, err := world.StartAPINode(ctx, o, sb, dsn, res.ChildLog, fmt.Sprintf("MD_MAX_CONNS=%d", maxConns))
	if err != nil {
		return nil, err
	}
	defer world.StopNode(node, log)
	res.Route = "/public/v1/prices/snapshot?ids=" + strings.Join(world.ReadsInputsOf(w).SnapshotIDs, ",")
	if _, err := node.Get(ctx, res.Route); err != nil {
		return nil, err
	}
	http.DefaultClient.CloseIdleConnections() // its connection would take a place under the cap
	target := measure.Target{Addr: node.Addr, Path: res.Route, Status: 200,
		Headers: map[string]string{"Authorization": "Bearer " + node.Secret}}

	for r := range idlePlan.Rounds {
		// Odd rounds run with the idle connections first: a machine whose
		// load drifts then favours neither side.
		round, err := idleRound(ctx, node, target, r%2 == 1)
		if err != nil {
			return nil, err
		}
		log.Info("idle round", "round", r+1, "rps_without", round.Without.RPS, "rps_with", round.With.RPS,
			"ratio", round.Ratio, "open_reported", round.OpenReported, "rss_mb_with", round.MemWith.RSSMB)
		res.Rounds = append(res.Rounds, round)
		res.Failed += baseline.Failures([]measure.LoadResult{round.Without, round.With})
	}
	var ratios []float64
	for _, r := range res.Rounds {
		ratios = append(ratios, r.Ratio)
		res.RPSWithout += r.Without.RPS / float64(len(res.Rounds))
		res.RPSWith += r.With.RPS / float64(len(res.Rounds))
	}
	res.RPSWithout, res.RPSWith = measure.Round2(res.RPSWithout), measure.Round2(res.RPSWith)
	res.Ratio = baseline.Median(ratios)
	res.Met = res.Ratio >= goalIdleRatio && res.Failed == 0
	last := res.Rounds[len(res.Rounds)-1]
	res.MemWith, res.MemWithout = last.MemWith, last.MemWithout
	res.Warnings = measure.LogWarnings(res.ChildLog)
	res.Seconds = measure.Round2(time.Since(began).Seconds())
	res.Print()
	return res, nil
}

// idleRound runs the snapshot without and with the idle connections open,
// in that order or (withFirst) the other.
func idleRound(ctx context.Context, node *world.APINode, target measure.Target, withFirst bool) (IdleRound, error) {
	var round IdleRound
	without := func() (err error) {
		if round.Without, err = measure.Load(ctx, target, idlePlan.Conns, idlePlan.Warmup, idlePlan.Duration); err != nil {
			return fmt.Errorf("without idle connections: %w", err)
		}
		round.MemWithout, err = measure.ReadProcMem(node.Pid())
		return err
	}
	with := func() error {
		t := time.Now()
		idle, err := openIdle(ctx, node.Addr, idleConns)
		if err != nil {
			return err
		}
		defer func() {
			for _, c := range idle {
				c.Close()
			}
		}()
		round.OpenSeconds = measure.Round2(time.Since(t).Seconds())
		if round.With, err = measure.Load(ctx, target, idlePlan.Conns, idlePlan.Warmup, idlePlan.Duration); err != nil {
			return fmt.Errorf("with idle connections: %w", err)
		}
		if round.MemWith, err = measure.ReadProcMem(node.Pid()); err != nil {
			return err
		}
		m, err := node.Metrics(ctx)
		round.OpenReported = m["marketdata_http_connections_open"]
		return err
	}
	first, second := without, with
	if withFirst {
		first, second = with, without
	}
	if err := first(); err != nil {
		return round, err
	}
	if err := second(); err != nil {
		return round, err
	}
	round.Ratio = measure.Round2(round.With.RPS / round.Without.RPS)
	return round, nil
}

// openIdle opens n keep-alive connections to addr, each after one answered
// request (GET / answers 404 without touching Redis), and leaves them idle.
func openIdle(ctx context.Context, addr string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	errs := make(chan error, idleDialers)
	var wg sync.WaitGroup
	for d := range idleDialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dialer net.Dialer
			for i := d; i < n; i += idleDialers {
				c, err := dialer.DialContext(ctx, "tcp", addr)
				if err == nil {
					conns[i] = c
					err = askOnce(c)
				}
				if err != nil {
					errs <- fmt.Errorf("idle connection %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return nil, err
	}
	return conns, nil
}

// askOnce sends one request on c and reads its answer, leaving c open.
func askOnce(c net.Conn) error {
	c.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // the I/O reports it
	defer c.SetDeadline(time.Time{})                //nolint:errcheck // the next request sets its own
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: bench\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// Print writes the rounds and the figure on stdout.
func (r *IdleResult) Print() {
	fmt.Printf("\nIdle connections — %d cores, %s, %s: snapshot (50 ids) with %d connections, then again with %d idle keep-alive connections open; MD_MAX_CONNS=%d\n",
		r.Machine.NumCPU, r.Machine.GoVersion, r.Machine.Date.Format("2006-01-02 15:04 MST"), idlePlan.Conns, r.IdleConns, r.MaxConns)
	for i, rd := range r.Rounds {
		fmt.Printf("round %d: %.0f rps without (p99 %.2f ms), %.0f rps with (p99 %.2f ms): ratio %.2f; opened in %.1f s; node reported %.0f open; VmRSS %.0f MB with, %.0f MB without\n",
			i+1, rd.Without.RPS, rd.Without.P99MS, rd.With.RPS, rd.With.P99MS, rd.Ratio, rd.OpenSeconds, rd.OpenReported,
			rd.MemWith.RSSMB, rd.MemWithout.RSSMB)
	}
	for _, m := range slices.Sorted(maps.Keys(r.Warnings)) {
		fmt.Printf("api log: %d × %s\n", r.Warnings[m], m)
	}
	fmt.Printf("goal: %-36s %9.2f  %s\n", fmt.Sprintf("idle-connections ratio ≥ %.2f", r.Goal), r.Ratio, measure.Met(r.Met))
	fmt.Printf("idle: %.0f rps without, %.0f rps with %d idle connections (median ratio %.2f); node VmRSS %.0f MB with them open (%.0f MB without), %d requests failed; in %.0f s; child log %s\n\n",
		r.RPSWithout, r.RPSWith, r.IdleConns, r.Ratio, r.MemWith.RSSMB, r.MemWithout.RSSMB, r.Failed, r.Seconds, r.ChildLog)
}

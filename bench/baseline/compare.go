package baseline

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// HTTPCompare is one route against the bare baseline, in alternating rounds.
type HTTPCompare struct {
	// Name labels the route in tables; Route is the request path.
	Name    string               `json:"name,omitempty"`
	Route   string               `json:"route"`
	API     []measure.LoadResult `json:"api_rounds"`
	Bare    []measure.LoadResult `json:"bare_rounds"`
	APIRPS  float64              `json:"api_rps_mean"`
	BareRPS float64              `json:"bare_rps_mean"`
	// The latency figures are the medians of the rounds' own.
	APIP50MS  float64   `json:"api_p50_ms_median"`
	APIP99MS  float64   `json:"api_p99_ms_median"`
	BareP50MS float64   `json:"bare_p50_ms_median"`
	BareP99MS float64   `json:"bare_p99_ms_median"`
	Ratios    []float64 `json:"round_ratios"`
	Ratio     float64   `json:"ratio_median"`
	// Goal is the ratio the route must reach; 0 when it has none (then Met
	// is true).
	Goal      float64 `json:"ratio_goal"`
	Met       bool    `json:"ratio_goal_met"`
	BodyBytes int     `json:"body_bytes"`
	// APICPU is the CPU each process group used during each API run: on a
	// shared machine, "other" tells whether someone else's work took cores.
	APICPU []measure.CPUUsage `json:"api_rounds_cpu"`
}

// LoadPlan is how compare loads each side: Rounds pairs of a bare run and an
// API run, each Warmup (not counted) then Duration with Conns connections.
type LoadPlan struct {
	Conns, Rounds    int
	Warmup, Duration time.Duration
}

// HTTPPlan is the HTTP benchmarks' plan: 64 connections, 3 paired rounds of
// 2 + 8 s per side.
var HTTPPlan = LoadPlan{Conns: 64, Rounds: 3, Warmup: 2 * time.Second, Duration: 8 * time.Second}

// Compare loads the API route and a bare Fiber handler serving the same
// bytes (a process of its own, started for this route), alternately, as plan
// says.
func Compare(ctx context.Context, o *world.Options, n *world.APINode, name, path string, goal float64, plan LoadPlan, log *slog.Logger) (HTTPCompare, error) {
	body, err := n.Get(ctx, path)
	if err != nil {
		return HTTPCompare{}, err
	}
	bare, err := StartBare(ctx, body, o.Out)
	if err != nil {
		return HTTPCompare{}, err
	}
	defer bare.Stop()
	res := HTTPCompare{Name: name, Route: path, Goal: goal, BodyBytes: len(body)}
	for r := range plan.Rounds {
		b, err := measure.Load(ctx, measure.Target{Addr: bare.Addr, Path: path, Status: 200}, plan.Conns, plan.Warmup, plan.Duration)
		if err != nil {
			return res, fmt.Errorf("bare: %w", err)
		}
		cpu := measure.SampleCPUOf(n.Pid(), "api")
		a, err := measure.Load(ctx, measure.Target{Addr: n.Addr, Path: path, Status: 200,
			Headers: map[string]string{"Authorization": "Bearer " + n.Secret}}, plan.Conns, plan.Warmup, plan.Duration)
		if err != nil {
			return res, fmt.Errorf("api: %w", err)
		}
		res.APICPU = append(res.APICPU, measure.SampleCPUOf(n.Pid(), "api").UsageSince(cpu))
		log.Info("round", "route", cmp.Or(name, path), "round", r+1, "bare_rps", b.RPS, "api_rps", a.RPS,
			"api_p99_ms", a.P99MS, "api_errors", a.Errors+a.Unexpected)
		res.Bare, res.API = append(res.Bare, b), append(res.API, a)
		res.Ratios = append(res.Ratios, measure.Round2(a.RPS/b.RPS))
	}
	// The machine is shared by the server, its dependencies and the load
	// generator: rounds vary. Each round pairs a bare run with an API run
	// right after it; the median of the round ratios is the figure.
	rounds := float64(len(res.API))
	for i := range res.API {
		res.BareRPS += res.Bare[i].RPS / rounds
		res.APIRPS += res.API[i].RPS / rounds
	}
	res.BareRPS, res.APIRPS = measure.Round2(res.BareRPS), measure.Round2(res.APIRPS)
	res.Ratio = Median(res.Ratios)
	res.APIP50MS = Median(field(res.API, func(l measure.LoadResult) float64 { return l.P50MS }))
	res.APIP99MS = Median(field(res.API, func(l measure.LoadResult) float64 { return l.P99MS }))
	res.BareP50MS = Median(field(res.Bare, func(l measure.LoadResult) float64 { return l.P50MS }))
	res.BareP99MS = Median(field(res.Bare, func(l measure.LoadResult) float64 { return l.P99MS }))
	res.Met = res.Ratio >= goal
	return res, nil
}

// Median is the middle value (the upper one of an even count).
func Median(xs []float64) float64 {
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// Failures counts the requests of rs that failed or answered another status.
func Failures(rs []measure.LoadResult) int64 {
	var n int64
	for _, r := range rs {
		n += r.Errors + r.Unexpected
	}
	return n
}

func field(rs []measure.LoadResult, f func(measure.LoadResult) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// PrintCompare writes the routes' table; latencies are the rounds' medians.
func PrintCompare(m world.Machine, cs []HTTPCompare) {
	fmt.Printf("\nHTTP benchmark — %d cores, %s, %s, 64 connections over loopback, bare Fiber baseline in the same run\n",
		m.NumCPU, m.GoVersion, m.Date.Format("2006-01-02 15:04 MST"))
	w := measure.NewTable()
	w.Rowf("route\tapi rps\tapi p50/p99 ms\tapi failed\tbare rps\tbare p50/p99 ms\tround ratios\tmedian\tgoal\n")
	for _, c := range cs {
		goal := "—"
		if c.Goal > 0 {
			goal = fmt.Sprintf("≥ %.2f %s", c.Goal, measure.Met(c.Met))
		}
		w.Rowf("%s\t%.0f\t%.2f / %.2f\t%d\t%.0f\t%.2f / %.2f\t%v\t%.2f\t%s\n", cmp.Or(c.Name, c.Route),
			c.APIRPS, c.APIP50MS, c.APIP99MS, Failures(c.API), c.BareRPS, c.BareP50MS, c.BareP99MS, c.Ratios, c.Ratio, goal)
	}
	w.Print()
	fmt.Println("cpu during the API runs (mean of rounds; \"other\" is work that is not the run's):")
	for _, c := range cs {
		fmt.Printf("  %s: %s\n", cmp.Or(c.Name, c.Route), MeanUsage(c.APICPU))
	}
}

// MeanUsage describes the mean of usages: cores per group and machine busy.
func MeanUsage(us []measure.CPUUsage) string {
	mean := map[string]float64{}
	busy := 0.0
	for _, u := range us {
		for g, v := range u.Cores {
			mean[g] += v / float64(len(us))
		}
		busy += u.MachineBusy / float64(len(us))
	}
	counted := 0.0
	for g, v := range mean {
		mean[g] = measure.Round2(v)
		counted += v
	}
	// Busy time no process accounts for: processes that exited between the
	// samples (someone's compiler, tests) and interrupt time.
	lost := busy/100*float64(runtime.NumCPU()) - counted
	return fmt.Sprintf("%s; machine busy %.0f%% (%.2f cores in exited processes or interrupts)", measure.Cores(mean), busy, max(0, lost))
}

// Package stream is the stream benchmark: WebSocket streams on one API node
// while prices flow through NATS (fan-out and end-to-end latency, CPU per
// delivery, memory per connection, lost updates, a subscriber ramp), with
// the streams anchor run in the same shape beside it.
package stream

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// StreamParams size the stream benchmark. The defaults are the issue's
// figures and only they count against its goals; the flags shrink a run
// while developing.
type StreamParams struct {
	Conns int `json:"connections"`
	Subs  int `json:"subscriptions_per_connection"`
	Hot   int `json:"hot_markets"`
	// Rate is the price updates published a second, drawn uniformly from
	// the hot set.
	Rate float64 `json:"updates_per_s"`
	// Steps are the ramp's subscriptions per connection after the steady
	// phase's Subs.
	Steps      []int `json:"ramp_subscriptions_per_connection"`
	PerAccount int   `json:"streams_per_account"`
	Accounts   int   `json:"accounts"`
	ReadConns  int   `json:"read_connections"`
	// MaxConns is the node's MD_MAX_CONNS.
	MaxConns int    `json:"md_max_conns"`
	Dialers  int    `json:"dialers"`
	Seed     uint64 `json:"seed"`

	WarmupS     float64 `json:"steady_warmup_s"`
	SteadyS     float64 `json:"steady_measured_s"`
	StepWarmupS float64 `json:"step_warmup_s"`
	StepS       float64 `json:"step_measured_s"`

	Warmup, Steady, StepWarmup, Step time.Duration `json:"-"`
	// Anchor is the streams anchor's directory ("" = ../shared/anchors/streams
	// beside the repository; "none" skips it).
	Anchor string `json:"-"`
}

// Params: the shape (5,000 connections × 20 of 2,000 hot
// markets at 1,000 updates/s ≈ 50,000 deliveries/s). The ramp adds
// subscriptions to the same connections, 2,500 deliveries/s per
// subscription a connection at 1,000 updates/s: 40 → 100,000/s, 80 →
// 200,000/s, 160 → 400,000/s; it stops after the first step over 250 ms.
// Eight streams per account keep the 10-per-account limit out of the way.
var Params = StreamParams{
	Conns: 5000, Subs: 20, Hot: 2000, Rate: 1000, Steps: []int{40, 60, 80, 100, 120, 160},
	PerAccount: 8, ReadConns: 64, Dialers: 32, Seed: world.ReadsSeed,
	Warmup: 3 * time.Second, Steady: 20 * time.Second, StepWarmup: 2 * time.Second, Step: 6 * time.Second,
}

// Durations of the stream benchmark's other stretches.
const (
	streamReadsWarmup = 2 * time.Second
	streamReadsRun    = 8 * time.Second
	// streamSubscribeTimeout bounds waiting for a step's acks and snapshots.
	streamSubscribeTimeout = 90 * time.Second
	// streamIdleSettle lets the node's memory settle before it is read,
	// past the node's first ping (every 15 s) and its clients' pongs: the
	// figure is an idle connection's steady state, not its first seconds.
	streamIdleSettle = 17 * time.Second
	// The lost-update check waits at least streamSettleMin once ingest has
	// applied everything (the node's 2 s safety net included), then until
	// no delivery came for streamQuiet, at most streamSettleMax.
	streamSettleMin = 3 * time.Second
	streamQuiet     = time.Second
	streamSettleMax = 20 * time.Second
	// streamPlanFactor: the schedule plans this many times the updates the
	// publishing time should need.
	streamPlanFactor = 3
)

// Flags lets a run shrink the stream benchmark.
func Flags(fs *flag.FlagSet, p *StreamParams) {
	fs.IntVar(&p.Conns, "stream.conns", p.Conns, "stream: WebSocket connections")
	fs.IntVar(&p.Subs, "stream.subs", p.Subs, "stream: markets each connection subscribes to in the steady phase")
	fs.IntVar(&p.Hot, "stream.hot", p.Hot, "stream: hot markets (the world; updates and subscriptions draw from them)")
	fs.Float64Var(&p.Rate, "stream.rate", p.Rate, "stream: price updates published per second")
	fs.DurationVar(&p.Steady, "stream.duration", p.Steady, "stream: measured length of the steady phase")
	fs.DurationVar(&p.Step, "stream.step-duration", p.Step, "stream: measured length of each ramp step")
	fs.StringVar(&p.Anchor, "stream.anchor", p.Anchor, "stream: the streams anchor's directory, run in the same shape in the same run (default "+anchorRel+
		" from the repository's root; \"none\" skips it; missing is an error only in CI)")
	fs.Func("stream.steps", "stream: the ramp's subscriptions per connection, comma-separated, increasing (default "+
		joinInts(p.Steps)+"; \"none\" skips the ramp)", func(s string) error {
		steps, err := parseSteps(s)
		if err == nil {
			p.Steps = steps
		}
		return err
	})
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// parseSteps reads the ramp's steps: increasing positive integers.
func parseSteps(s string) ([]int, error) {
	if s == "none" {
		return nil, nil
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("ramp steps must be increasing positive integers: %q", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// validate checks p against what the node allows: distinct markets per
// connection from the hot set, 500 per connection, and the accounts' keys.
func (p *StreamParams) validate() error {
	most := slices.Max(append([]int{p.Subs}, p.Steps...))
	switch {
	case p.Conns < 1 || p.Subs < 1 || p.Rate <= 0 || p.Steady <= 0 || p.Step <= 0:
		return fmt.Errorf("stream parameters must be positive: %+v", *p)
	case p.Hot < world.ReadsPerEvent || p.Hot%world.ReadsPerEvent != 0:
		return fmt.Errorf("stream: hot markets %d must be a multiple of %d (markets per event)", p.Hot, world.ReadsPerEvent)
	case most > p.Hot || most > 500:
		return fmt.Errorf("stream: %d subscriptions per connection: at most 500 and at most the %d hot markets", most, p.Hot)
	case len(p.Steps) > 0 && p.Steps[0] <= p.Subs:
		return fmt.Errorf("stream: the ramp's first step %d must be above the steady phase's %d", p.Steps[0], p.Subs)
	}
	return nil
}

func Run(ctx context.Context, o *world.Options, log *slog.Logger) (any, error) {
	began := time.Now()
	p := Params
	p.Steps = slices.Clone(p.Steps)
	if err := p.validate(); err != nil {
		return nil, err
	}
	p.Accounts = (p.Conns + p.PerAccount - 1) / p.PerAccount
	p.MaxConns = p.Conns + p.ReadConns + 1000
	p.WarmupS, p.SteadyS, p.StepWarmupS, p.StepS = p.Warmup.Seconds(), p.Steady.Seconds(), p.StepWarmup.Seconds(), p.Step.Seconds()
	// This process holds every client connection.
	if err := measure.RaiseFileLimit(uint64(p.Conns + p.ReadConns + 1024)); err != nil {
		return nil, err
	}
	res := &StreamResult{Bench: "stream", Machine: o.Machine, Params: p, Anchor: streamAnchor,
		ChildLogs: map[string]string{}, ChildWarnings: map[string]map[string]int{}}
	// The anchor first, while nothing of ours runs: same shape, same
	// machine, same run.
	var err error
	res.AnchorRun, err = runAnchor(ctx, o, p, p.Anchor, log)
	defer res.AnchorRun.cleanup()
	if err != nil {
		return nil, err
	}
	w := world.NewReadsWorld(p.Hot/world.ReadsPerEvent, world.ReadsPerEvent, p.Seed)

	sb, dsn, load, err := world.OpenLoaded(ctx, o, log, "stream", w)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	res.Load = load
	// One more account for the snapshot reads.
	secrets, err := world.CreateBenchKeys(ctx, dsn, p.Accounts+1, world.KeyWorkers)
	if err != nil {
		return nil, fmt.Errorf("create keys: %w", err)
	}
	res.ChildLogs["ingest"] = filepath.Join(o.Out, "stream-ingest.log")
	ing, err := world.StartIngestChild(ctx, o, sb, dsn, res.ChildLogs["ingest"], log)
	if err != nil {
		return nil, err
	}
	defer world.StopIngest(ing, log, "stream")
	res.ChildLogs["api"] = filepath.Join(o.Out, "stream-api.log")
	// The node's connection cap fits the load with room, under the
	// open-file limit (the default 20,000 is the whole of it).
	node, err := world.StartAPIChild(ctx, o, sb, world.WithAppName(dsn, "api"), res.ChildLogs["api"], fmt.Sprintf("MD_MAX_CONNS=%d", p.MaxConns))
	if err != nil {
		return nil, err
	}
	defer world.StopNode(node, log)
	node.Secret = secrets[p.Accounts]
	if err := sb.MonitorPostgres(ctx); err != nil {
		return nil, err
	}
	log.Info("stream: processes ready", "ingest", ing.Pid(), "api", node.Pid())

	e, err := newStreamEnv(ctx, o, sb, w, ing, node, p, secrets[:p.Accounts], began)
	if err != nil {
		return nil, err
	}
	defer e.stopAll(ctx)
	if err := e.run(ctx, res, log); err != nil {
		return nil, err
	}
	measure.AddLogWarnings(res.ChildWarnings, res.ChildLogs)
	res.summarise()
	res.Seconds = measure.Round2(time.Since(began).Seconds())
	res.Print()
	return res, nil
}

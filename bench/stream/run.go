package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// streamEnv is one stream benchmark's running parts: the node, ingest, the
// publisher, the notice clock and the client connections.
type streamEnv struct {
	p       StreamParams
	sb      *world.Sandbox
	ing     *world.Child
	node    *world.APINode
	secrets []string
	ids     []string
	load    *streamLoad
	pub     *streamPublisher
	// lists are each connection's markets in subscribe order: a step takes
	// the next ones.
	lists   [][]int32
	clients []*streamClient
	// subs is the subscriptions per connection so far; rounds the subscribe
	// commands each connection sent.
	subs, rounds int
	children     map[int]string
	target       measure.Target
	stopNotices  func()
	log          *slog.Logger
	// out receives diagnostics: the node's goroutines when subscribing
	// stalls, its CPU profile of the steady phase with -profile.
	out     string
	profile bool
	opts    *world.Options
}

func newStreamEnv(ctx context.Context, o *world.Options, sb *world.Sandbox, w *world.ReadsWorld, ing *world.Child, node *world.APINode,
	p StreamParams, secrets []string, began time.Time) (*streamEnv, error) {
	e := &streamEnv{p: p, sb: sb, ing: ing, node: node, secrets: secrets, out: o.Out, profile: o.Profile, opts: o,
		children: map[int]string{node.Pid(): "api", ing.Pid(): "ingest"}}
	index := make(map[string]int32, len(w.Markets))
	for i, m := range w.Markets {
		e.ids = append(e.ids, m.ID)
		index[m.ID] = int32(i)
	}
	// Publishing runs through three read runs, the steady phase and the
	// ramp's steps (each with its subscribe); the plan has streamPlanFactor
	// times that.
	// The anchor's run beside the pipeline: its warm-up and steady phase,
	// and about 20 s more of connecting, draining and settling.
	pubFor := 3*(streamReadsWarmup+streamReadsRun) + 2*(p.Warmup+p.Steady) + 20*time.Second +
		time.Duration(len(p.Steps))*(p.StepWarmup+p.Step+10*time.Second)
	planned := int(p.Rate*pubFor.Seconds()) * streamPlanFactor
	r := world.NewRand(p.Seed + 2)
	sched := world.NewSchedule(began, len(w.Markets), planned, func() int32 { return int32(r.IntN(len(w.Markets))) })
	clock := newNoticeClock(sched, index)
	e.load = &streamLoad{sched: sched, clock: clock, index: index, retry: make(chan *streamClient, p.Conns)}
	pub, err := world.NewPublisher(sb.NC, world.PublishWindow)
	if err != nil {
		return nil, err
	}
	e.pub = &streamPublisher{pub: pub, prices: w.Prices, sched: sched, clock: clock, prefix: sb.Ingest.SubjectPrefix, rate: p.Rate}
	if e.stopNotices, err = clock.follow(o.NATSURL, sb.Ingest.NoticeSubject); err != nil {
		return nil, err
	}
	e.lists = subscriptionLists(p.Conns, max(p.Subs, maxStep(p.Steps)), len(w.Markets), p.Seed+1)
	e.target = measure.Target{Addr: node.Addr, Path: world.SnapshotPath(world.ReadsInputsOf(w).SnapshotIDs), Status: 200,
		Headers: map[string]string{"Authorization": "Bearer " + node.Secret}}
	if _, err := node.Get(ctx, e.target.Path); err != nil {
		e.stopNotices()
		return nil, err
	}
	return e, nil
}

func maxStep(steps []int) int {
	if len(steps) == 0 {
		return 0
	}
	return steps[len(steps)-1]
}

// subscriptionLists draws, for each of n connections, size distinct markets
// of markets uniformly (a partial Fisher–Yates shuffle per connection).
func subscriptionLists(n, size, markets int, seed uint64) [][]int32 {
	r := world.NewRand(seed)
	perm := make([]int32, markets)
	for i := range perm {
		perm[i] = int32(i)
	}
	out := make([][]int32, n)
	for c := range out {
		for i := range size {
			j := i + r.IntN(markets-i)
			perm[i], perm[j] = perm[j], perm[i]
		}
		out[c] = append([]int32(nil), perm[:size]...)
	}
	return out
}

// run measures, in order: snapshot reads with no stream, the node's memory
// with the connections idle, the steady phase, reads with the streams
// flowing, the ramp, lost updates, and reads once the streams are closed.
func (e *streamEnv) run(ctx context.Context, res *StreamResult, log *slog.Logger) error {
	e.log = log
	p := e.p
	ingStart, err := world.StartPhase(ctx, e.ing, e.sb.PG)
	if err != nil {
		return err
	}
	rd := &res.Reads
	rd.Route = e.target.Path
	e.pub.start(ctx)
	var cpuBefore, cpuAfter measure.CPUUsage
	if rd.Before, cpuBefore, err = e.reads(ctx); err != nil {
		return fmt.Errorf("reads without streams: %w", err)
	}
	if err := e.pause(ctx); err != nil {
		return err
	}
	log.Info("stream: reads without streams", "rps", rd.Before.RPS, "p99_ms", rd.Before.P99MS)

	if res.Memory, err = e.idle(ctx); err != nil {
		return err
	}
	log.Info("stream: idle connections", "conns", p.Conns, "rss_per_conn_bytes", res.Memory.PerConnBytes,
		"connect_s", res.Memory.ConnectSeconds, "subscribe_s", res.Memory.SubscribeSeconds)

	e.pub.start(ctx)
	steady := sleepFor(p.Steady)
	if e.profile {
		steady = func(ctx context.Context) error {
			// An execution trace of 3 s first (scheduling latency: go
			// tool trace -pprof=sched), then the CPU profile.
			trace := filepath.Join(e.out, "stream-api-steady.trace")
			err := measure.FetchTo(ctx, fmt.Sprintf("http://%s/debug/pprof/trace?seconds=3", e.node.Admin), trace)
			log.Info("stream: node execution trace of the steady phase", "file", trace, "err", err)
			file := filepath.Join(e.out, "stream-api-steady.cpu.pprof")
			err = measure.FetchTo(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", e.node.Admin, max(1, int(p.Steady.Seconds())-3)), file)
			log.Info("stream: node CPU profile of the steady phase", "file", file, "err", err)
			return nil
		}
	}
	if res.Steady, err = e.measure(ctx, "steady", p.Warmup, steady); err != nil {
		return fmt.Errorf("steady: %w", err)
	}
	var with measure.CPUUsage
	if rd.During, err = e.measure(ctx, "during reads", 0, func(ctx context.Context) (err error) {
		rd.With, with, err = e.reads(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("reads with streams: %w", err)
	}
	rd.CPUWith = with
	log.Info("stream: reads with streams", "rps", rd.With.RPS, "p99_ms", rd.With.P99MS)

	for i, s := range p.Steps {
		if err := e.subscribeTo(ctx, s); err != nil {
			return fmt.Errorf("ramp step %d: %w", i+1, err)
		}
		st, err := e.measure(ctx, fmt.Sprintf("ramp %d", i+1), p.StepWarmup, sleepFor(p.Step))
		if err != nil {
			return fmt.Errorf("ramp step %d: %w", i+1, err)
		}
		res.Ramp = append(res.Ramp, st)
		if st.E2E.P99MS > goalRampP99MS {
			log.Info("stream: ramp stops: e2e p99 over the bound", "step", i+1, "p99_ms", st.E2E.P99MS)
			break
		}
	}

	if err := e.pause(ctx); err != nil {
		return err
	}
	res.SettleSeconds = e.settle(ctx)
	res.Faults = e.closeClients()
	log.Info("stream: lost-update check", "lost", res.Faults.Lost, "backwards", res.Faults.Backwards, "seq_gaps", res.Faults.SeqGaps)

	if err := e.anchorBeside(ctx, &res.AnchorRun); err != nil {
		return err
	}

	e.pub.start(ctx)
	if rd.After, cpuAfter, err = e.reads(ctx); err != nil {
		return fmt.Errorf("reads after the streams: %w", err)
	}
	if err := e.pause(ctx); err != nil {
		return err
	}
	without := (rd.Before.RPS + rd.After.RPS) / 2
	rd.CPUWithout = measure.CPUUsage{Cores: map[string]float64{}, MachineBusy: measure.Round2((cpuBefore.MachineBusy + cpuAfter.MachineBusy) / 2)}
	for _, c := range []measure.CPUUsage{cpuBefore, cpuAfter} {
		for g, v := range c.Cores {
			rd.CPUWithout.Cores[g] = measure.Round2(rd.CPUWithout.Cores[g] + v/2)
		}
	}
	if without > 0 {
		rd.Ratio = measure.Round2(rd.With.RPS / without)
	}
	if a, b := rd.CPUWith.Cores["api"], rd.CPUWithout.Cores["api"]; a > 0 && b > 0 && without > 0 {
		rd.PerCoreRatio = measure.Round2((rd.With.RPS / a) / (without / b))
	}
	if res.Ingest, err = ingStart.End(ctx, e.ing); err != nil {
		return err
	}
	sp := e.pub
	res.Publish = world.PollPublish{Planned: len(e.load.sched.Market), Sent: sp.sent, Seconds: measure.Round2(sp.seconds), Target: p.Rate}
	if sp.seconds > 0 {
		res.Publish.Rate = measure.Round2(float64(sp.sent) / sp.seconds)
	}
	k := e.load.clock
	res.Notices, res.NoticeUnknown, res.NoticeBad = k.notices.Load(), k.unknown.Load(), k.undecodable.Load()
	res.Refused = e.load.refused.Load()
	return nil
}

// sleepFor is a phase body that only waits d.
func sleepFor(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error { return measure.SleepCtx(ctx, d) }
}

// alive fails once ingest or the node has exited.
func (e *streamEnv) alive() error {
	return errors.Join(e.ing.Alive(), e.node.Alive())
}

// pause stops publishing and waits until ingest has applied everything.
func (e *streamEnv) pause(ctx context.Context) error {
	if err := e.pub.stop(ctx); err != nil {
		return err
	}
	return e.sb.Drained(ctx, world.DrainTimeout, e.alive)
}

// stopAll releases what run may have left on an error.
func (e *streamEnv) stopAll(ctx context.Context) {
	if err := e.pub.stop(ctx); err != nil && e.log != nil {
		e.log.Warn("stream: publisher stop", "err", err)
	}
	if e.clients != nil {
		e.closeClients()
	}
	e.stopNotices()
}

// anchorBeside runs the anchor's steady shape once more while our pipeline
// carries the steady phase's update rate beside it (our streams are closed
// by now; the node only follows the notices): the anchor on the machine
// our node had, whose other processes the quiet anchor run does not have.
// The anchor's failure is recorded, not fatal (the quiet run is the
// goal's reference); ours to pause the pipeline after it is.
func (e *streamEnv) anchorBeside(ctx context.Context, a *AnchorResult) error {
	if a.bin == "" || a.Steady == nil {
		return nil
	}
	e.pub.start(ctx)
	before := measure.SampleCPUNamed(e.children)
	run, err := anchorLoad(ctx, e.opts, a.bin, "steady-beside-pipeline", e.p.Subs, e.p, e.p.Warmup, e.p.Steady, e.log)
	usage := measure.SampleCPUNamed(e.children).UsageSince(before)
	if perr := e.pause(ctx); perr != nil {
		return fmt.Errorf("pause after the anchor beside the pipeline: %w", perr)
	}
	if err != nil {
		a.BesideError = err.Error()
		e.log.Warn("stream: anchor beside the pipeline", "err", err)
		return nil
	}
	a.BesidePipeline = &run
	a.BesideCores, a.BesideBusyPct = usage.Cores, usage.MachineBusy
	e.log.Info("stream: anchor beside the pipeline", "p50_ms", run.P50MS, "p99_ms", run.P99MS, "cpu_us_per_delivery", run.CPUPerDelivUS)
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// streamEnv is one stream benchmark's running parts: the node, ingest, the
// publisher, the notice clock and the client connections.
type streamEnv struct {
	p       StreamParams
	sb      *Sandbox
	ing     *Child
	node    *APINode
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
	target       Target
	stopNotices  func()
	log          *slog.Logger
	// out receives diagnostics: the node's goroutines when subscribing
	// stalls, its CPU profile of the steady phase with -profile.
	out     string
	profile bool
}

func newStreamEnv(ctx context.Context, o *Options, sb *Sandbox, w *readsWorld, ing *Child, node *APINode,
	p StreamParams, secrets []string, began time.Time) (*streamEnv, error) {
	e := &streamEnv{p: p, sb: sb, ing: ing, node: node, secrets: secrets, out: o.Out, profile: o.Profile,
		children: map[int]string{node.Pid(): "api", ing.Pid(): "ingest"}}
	index := make(map[string]int32, len(w.Markets))
	for i, m := range w.Markets {
		e.ids = append(e.ids, m.ID)
		index[m.ID] = int32(i)
	}
	// Publishing runs through three read runs, the steady phase and the
	// ramp's steps (each with its subscribe); the plan has streamPlanFactor
	// times that.
	pubFor := 3*(streamReadsWarmup+streamReadsRun) + p.Warmup + p.Steady +
		time.Duration(len(p.Steps))*(p.StepWarmup+p.Step+10*time.Second)
	planned := int(p.Rate*pubFor.Seconds()) * streamPlanFactor
	r := newRand(p.Seed + 2)
	sched := newSchedule(began, len(w.Markets), planned, func() int32 { return int32(r.IntN(len(w.Markets))) })
	clock := newNoticeClock(sched, index)
	e.load = &streamLoad{sched: sched, clock: clock, index: index, retry: make(chan *streamClient, p.Conns)}
	pub, err := NewPublisher(sb.NC, pollPublishWindow)
	if err != nil {
		return nil, err
	}
	e.pub = &streamPublisher{pub: pub, prices: w.Prices, sched: sched, clock: clock, prefix: sb.Ingest.SubjectPrefix, rate: p.Rate}
	if e.stopNotices, err = clock.follow(o.NATSURL, sb.Ingest.NoticeSubject); err != nil {
		return nil, err
	}
	e.lists = subscriptionLists(p.Conns, max(p.Subs, maxStep(p.Steps)), len(w.Markets), p.Seed+1)
	e.target = Target{Addr: node.Addr, Path: snapshotPath(readsInputs(w).SnapshotIDs), Status: 200,
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
	r := newRand(seed)
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
	ingStart, err := startPhase(ctx, e.ing)
	if err != nil {
		return err
	}
	rd := &res.Reads
	rd.Route = e.target.Path
	e.pub.start(ctx)
	var cpuBefore, cpuAfter CPUUsage
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
			file := filepath.Join(e.out, "stream-api-steady.cpu.pprof")
			err := fetchTo(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", e.node.Admin, int(p.Steady.Seconds())), file)
			log.Info("stream: node CPU profile of the steady phase", "file", file, "err", err)
			return nil
		}
	}
	if res.Steady, err = e.measure(ctx, "steady", p.Warmup, steady); err != nil {
		return fmt.Errorf("steady: %w", err)
	}
	var with CPUUsage
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

	e.pub.start(ctx)
	if rd.After, cpuAfter, err = e.reads(ctx); err != nil {
		return fmt.Errorf("reads after the streams: %w", err)
	}
	if err := e.pause(ctx); err != nil {
		return err
	}
	without := (rd.Before.RPS + rd.After.RPS) / 2
	rd.CPUWithout = CPUUsage{Cores: map[string]float64{}, MachineBusy: round2((cpuBefore.MachineBusy + cpuAfter.MachineBusy) / 2)}
	for _, c := range []CPUUsage{cpuBefore, cpuAfter} {
		for g, v := range c.Cores {
			rd.CPUWithout.Cores[g] = round2(rd.CPUWithout.Cores[g] + v/2)
		}
	}
	if without > 0 {
		rd.Ratio = round2(rd.With.RPS / without)
	}
	if a, b := rd.CPUWith.Cores["api"], rd.CPUWithout.Cores["api"]; a > 0 && b > 0 && without > 0 {
		rd.PerCoreRatio = round2((rd.With.RPS / a) / (without / b))
	}
	if res.Ingest, err = ingStart.end(ctx, e.ing); err != nil {
		return err
	}
	sp := e.pub
	res.Publish = PollPublish{Planned: len(e.load.sched.Market), Sent: sp.sent, Seconds: round2(sp.seconds), Target: p.Rate}
	if sp.seconds > 0 {
		res.Publish.Rate = round2(float64(sp.sent) / sp.seconds)
	}
	k := e.load.clock
	res.Notices, res.NoticeUnknown, res.NoticeBad = k.notices.Load(), k.unknown.Load(), k.undecodable.Load()
	res.Refused = e.load.refused.Load()
	return nil
}

// sleepFor is a phase body that only waits d.
func sleepFor(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error { return sleepCtx(ctx, d) }
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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
	return e.sb.Drained(ctx, drainTimeout, e.alive)
}

// reads loads the snapshot route and samples CPU meanwhile.
func (e *streamEnv) reads(ctx context.Context) (LoadResult, CPUUsage, error) {
	cpu := SampleCPUNamed(e.children)
	r, err := Load(ctx, e.target, e.p.ReadConns, streamReadsWarmup, streamReadsRun)
	return r, SampleCPUNamed(e.children).UsageSince(cpu), err
}

// idle opens the connections and subscribes them, with no update flowing,
// and measures what they cost the node.
func (e *streamEnv) idle(ctx context.Context) (StreamMemory, error) {
	m := StreamMemory{Conns: e.p.Conns, Subscriptions: e.p.Conns * e.p.Subs}
	var err error
	if err := sleepCtx(ctx, time.Second); err != nil {
		return m, err
	}
	if m.Before, err = procMem(e.node.Pid()); err != nil {
		return m, err
	}
	before, err := e.node.Metrics(ctx)
	if err != nil {
		return m, err
	}
	t := time.Now()
	if err := e.dialAll(ctx); err != nil {
		return m, err
	}
	m.ConnectSeconds = round2(time.Since(t).Seconds())
	t = time.Now()
	if err := e.subscribeTo(ctx, e.p.Subs); err != nil {
		return m, err
	}
	m.SubscribeSeconds = round2(time.Since(t).Seconds())
	if err := sleepCtx(ctx, streamIdleSettle); err != nil {
		return m, err
	}
	if m.With, err = procMem(e.node.Pid()); err != nil {
		return m, err
	}
	after, err := e.node.Metrics(ctx)
	if err != nil {
		return m, err
	}
	n := float64(e.p.Conns)
	m.PerConnBytes = round2((m.With.RSSMB - m.Before.RSSMB) * 1024 * 1024 / n)
	m.HeapPerConnBytes = round2((after["go_memstats_heap_inuse_bytes"] - before["go_memstats_heap_inuse_bytes"]) / n)
	m.GoroutinesPerConn = round2((after["go_goroutines"] - before["go_goroutines"]) / n)
	return m, nil
}

// dialAll opens the connections, Dialers at a time; connection i uses the
// key of account i / PerAccount.
func (e *streamEnv) dialAll(ctx context.Context) error {
	e.clients = make([]*streamClient, e.p.Conns)
	var next atomic.Int64
	var once sync.Once
	var first error
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range e.p.Dialers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= e.p.Conns || dctx.Err() != nil {
					return
				}
				c, err := dialStream(dctx, e.load, e.node.Addr, e.secrets[i/e.p.PerAccount], i)
				if err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				e.clients[i] = c
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// subscribeTo raises every connection to s subscriptions and waits for all
// acknowledgements and snapshots.
func (e *streamEnv) subscribeTo(ctx context.Context, s int) error {
	from := e.subs
	var next atomic.Int64
	errs := make(chan error, e.p.Dialers)
	for range e.p.Dialers {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(e.clients) {
					errs <- nil
					return
				}
				if err := e.clients[i].subscribe(e.lists[i][from:s], e.ids); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
	for range e.p.Dialers {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return err
	}
	e.subs, e.rounds = s, e.rounds+1
	acks, snaps := int64(e.rounds*len(e.clients)), int64(s*len(e.clients))
	deadline := time.Now().Add(streamSubscribeTimeout)
	report := time.Now().Add(5 * time.Second)
	for e.load.acks.Load() < acks || e.load.snapshots.Load() < snaps {
		if err := e.retryRefused(); err != nil {
			return err
		}
		if time.Now().After(report) {
			report = time.Now().Add(5 * time.Second)
			m, _ := e.node.Metrics(ctx) // progress only
			e.log.Info("stream: subscribing", "acks", e.load.acks.Load(), "of", acks, "snapshots", e.load.snapshots.Load(), "of", snaps,
				"node_open", m["marketdata_streams_open"], "node_acks_sent", m[`marketdata_stream_messages_total{type="subscribed"}`],
				"node_prices_sent", m[`marketdata_stream_messages_total{type="price"}`], "refused_unavailable", e.load.refused.Load())
		}
		if err := e.alive(); err != nil {
			return err
		}
		if n := e.load.ended.Load(); n > 0 {
			return fmt.Errorf("%d connections ended while subscribing, first: %s", n, e.load.whyEnded())
		}
		if time.Now().After(deadline) {
			dump := filepath.Join(e.out, "stream-api.goroutines.txt")
			if err := fetchTo(ctx, "http://"+e.node.Admin+"/debug/pprof/goroutine?debug=1", dump); err != nil {
				dump = "not taken: " + err.Error()
			}
			return fmt.Errorf("subscribing to %d markets a connection: %d of %d acks and %d of %d snapshots after %s (node goroutines: %s)",
				s, e.load.acks.Load(), acks, e.load.snapshots.Load(), snaps, streamSubscribeTimeout, dump)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// retryRefused sends again the subscribes the node refused as unavailable
// (as a client must); a connection is only ever waiting for one.
func (e *streamEnv) retryRefused() error {
	for {
		select {
		case c := <-e.load.retry:
			if err := c.resubscribe(e.ids); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// measure waits warmup, then makes a phase current while body runs, and
// reports its deliveries, latencies and the node's CPU.
func (e *streamEnv) measure(ctx context.Context, name string, warmup time.Duration, body func(context.Context) error) (StreamPhaseResult, error) {
	r := StreamPhaseResult{Name: name, SubsPerConn: e.subs, Subscriptions: e.subs * len(e.clients)}
	if err := sleepCtx(ctx, warmup); err != nil {
		return r, err
	}
	ph := &streamPhase{}
	before, err := e.node.Metrics(ctx)
	if err != nil {
		return r, err
	}
	cpu, sent, t := SampleCPUNamed(e.children), e.pub.pub.sent.Load(), time.Now()
	e.load.phase.Store(ph)
	err = body(ctx)
	e.load.phase.Store(nil)
	el := time.Since(t).Seconds()
	cpuEnd := SampleCPUNamed(e.children)
	if err != nil {
		return r, err
	}
	after, err := e.node.Metrics(ctx)
	if err != nil {
		return r, err
	}
	r.NodeFanout = after.Sub(before).SecondsHistogram("marketdata_stream_fanout_seconds")
	// Notices that had not reached the load tool when their delivery did
	// have had time since.
	if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
		return r, err
	}
	r.E2E, r.Fanout = ph.settle(e.load.clock)
	r.Seconds = round2(el)
	r.PublishRate = round2(float64(e.pub.pub.sent.Load()-sent) / el)
	r.Expected = round2(float64(e.fanoutOf(int(sent), int(e.pub.pub.sent.Load()))) / el)
	r.Deliveries, r.Conflated = ph.deliveries.Load(), ph.conflated.Load()
	r.DeliveriesPerS = round2(float64(r.Deliveries) / el)
	r.CPU = cpuEnd.UsageSince(cpu)
	r.NodeCPUSeconds = round2(cpuEnd.seconds["api"] - cpu.seconds["api"])
	if r.Deliveries > 0 {
		r.CPUPerDelivUS = round2(1e6 * (cpuEnd.seconds["api"] - cpu.seconds["api"]) / float64(r.Deliveries))
	}
	if mem, err := procMem(e.node.Pid()); err == nil {
		r.NodeRSSMB = mem.RSSMB
	}
	if r.IngestBacklog, err = ingestBacklog(ctx, e.sb); err != nil {
		return r, err
	}
	if err := e.alive(); err != nil {
		return r, err
	}
	e.log.Info("stream phase", "phase", name, "subs_per_conn", r.SubsPerConn, "deliveries_per_s", r.DeliveriesPerS,
		"expected", r.Expected, "e2e_p50_ms", r.E2E.P50MS, "e2e_p99_ms", r.E2E.P99MS, "fanout_p50_ms", r.Fanout.P50MS,
		"fanout_p99_ms", r.Fanout.P99MS, "cpu_us_per_delivery", r.CPUPerDelivUS, "conflated", r.Conflated,
		"cores", r.CPU.Cores, "ended", e.load.ended.Load())
	return r, nil
}

// fanoutOf is the deliveries updates [from, to) of the schedule make to the
// connections' current subscriptions: what a phase that saw them published
// should deliver (less what ingest folds: a batch holding two versions of a
// market applies the newest only).
func (e *streamEnv) fanoutOf(from, to int) int64 {
	subscribers := make([]int64, len(e.ids))
	for _, l := range e.lists {
		for _, m := range l[:e.subs] {
			subscribers[m]++
		}
	}
	var n int64
	for _, m := range e.load.sched.Market[from:min(to, len(e.load.sched.Market))] {
		n += subscribers[m]
	}
	return n
}

// settle waits, once ingest has applied the last update, until deliveries
// stop, and returns how long that took.
func (e *streamEnv) settle(ctx context.Context) float64 {
	start := time.Now()
	last, quiet := e.load.live.Load(), start
	for time.Since(start) < streamSettleMax && ctx.Err() == nil {
		if sleepCtx(ctx, 100*time.Millisecond) != nil {
			break
		}
		if n := e.load.live.Load(); n != last {
			last, quiet = n, time.Now()
		}
		if time.Since(start) >= streamSettleMin && time.Since(quiet) >= streamQuiet {
			break
		}
	}
	return round2(time.Since(start).Seconds())
}

// closeClients closes every connection and adds up what they saw: faults,
// and the markets each holds below their newest published version.
func (e *streamEnv) closeClients() StreamFaults {
	var wg sync.WaitGroup
	for _, c := range e.clients {
		if c != nil {
			wg.Go(c.close)
		}
	}
	wg.Wait()
	var f StreamFaults
	for _, c := range e.clients {
		if c == nil {
			continue
		}
		f.add(c.faults)
		f.Repeats += c.repeats
		lost, why := c.behind(e.load.sched, e.ids)
		f.Lost += lost
		for _, msg := range []string{c.first, why} {
			if msg != "" && len(f.First) < maxRegressionsKept {
				f.First = append(f.First, msg)
			}
		}
	}
	e.clients = nil
	return f
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

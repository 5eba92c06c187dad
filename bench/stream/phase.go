package stream

import (
	"context"
	"path/filepath"
	"time"

	measureb "github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// reads loads the snapshot route and samples CPU meanwhile.
func (e *streamEnv) reads(ctx context.Context) (measureb.LoadResult, measureb.CPUUsage, error) {
	cpu := measureb.SampleCPUNamed(e.children)
	r, err := measureb.Load(ctx, e.target, e.p.ReadConns, streamReadsWarmup, streamReadsRun)
	return r, measureb.SampleCPUNamed(e.children).UsageSince(cpu), err
}

// idle opens the connections and subscribes them, with no update flowing,
// and measures what they cost the node.
func (e *streamEnv) idle(ctx context.Context) (StreamMemory, error) {
	m := StreamMemory{Conns: e.p.Conns, Subscriptions: e.p.Conns * e.p.Subs}
	var err error
	if err := measureb.SleepCtx(ctx, time.Second); err != nil {
		return m, err
	}
	if m.Before, err = measureb.ReadProcMem(e.node.Pid()); err != nil {
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
	m.ConnectSeconds = measureb.Round2(time.Since(t).Seconds())
	t = time.Now()
	if err := e.subscribeTo(ctx, e.p.Subs); err != nil {
		return m, err
	}
	m.SubscribeSeconds = measureb.Round2(time.Since(t).Seconds())
	if err := measureb.SleepCtx(ctx, streamIdleSettle); err != nil {
		return m, err
	}
	if m.With, err = measureb.ReadProcMem(e.node.Pid()); err != nil {
		return m, err
	}
	after, err := e.node.Metrics(ctx)
	if err != nil {
		return m, err
	}
	if e.profile {
		// What the idle connections hold: go tool pprof -sample_index=inuse_space.
		file := filepath.Join(e.out, "stream-api-idle.heap.pprof")
		err := measureb.FetchTo(ctx, "http://"+e.node.Admin+"/debug/pprof/heap", file)
		e.log.Info("stream: node heap profile with the connections idle", "file", file, "err", err)
	}
	n := float64(e.p.Conns)
	m.PerConnBytes = measureb.Round2((m.With.RSSMB - m.Before.RSSMB) * 1024 * 1024 / n)
	m.HeapPerConnBytes = measureb.Round2((after["go_memstats_heap_inuse_bytes"] - before["go_memstats_heap_inuse_bytes"]) / n)
	m.StackPerConnBytes = measureb.Round2((after["go_memstats_stack_inuse_bytes"] - before["go_memstats_stack_inuse_bytes"]) / n)
	m.GoroutinesPerConn = measureb.Round2((after["go_goroutines"] - before["go_goroutines"]) / n)
	return m, nil
}

// measure waits warmup, then makes a phase current while body runs, and
// reports its deliveries, latencies and the node's CPU.
func (e *streamEnv) measure(ctx context.Context, name string, warmup time.Duration, body func(context.Context) error) (StreamPhaseResult, error) {
	r := StreamPhaseResult{Name: name, SubsPerConn: e.subs, Subscriptions: e.subs * len(e.clients)}
	if err := measureb.SleepCtx(ctx, warmup); err != nil {
		return r, err
	}
	ph := &streamPhase{}
	before, err := e.node.Metrics(ctx)
	if err != nil {
		return r, err
	}
	ingBefore, err := e.ing.Metrics(ctx)
	if err != nil {
		return r, err
	}
	cpu, sent, t := measureb.SampleCPUNamed(e.children), e.pub.pub.Sent.Load(), time.Now()
	e.load.phase.Store(ph)
	err = body(ctx)
	e.load.phase.Store(nil)
	el := time.Since(t).Seconds()
	cpuEnd := measureb.SampleCPUNamed(e.children)
	if err != nil {
		return r, err
	}
	after, err := e.node.Metrics(ctx)
	if err != nil {
		return r, err
	}
	r.NodeFanout = after.Sub(before).SecondsHistogram("marketdata_stream_fanout_seconds")
	ingAfter, err := e.ing.Metrics(ctx)
	if err != nil {
		return r, err
	}
	b, _, _ := ingAfter.Sub(ingBefore).Histogram("marketdata_ingest_batch_messages")
	r.IngestBatch = [2]float64{measureb.Round2(measureb.Finite(measureb.Quantile(0.5, b))), measureb.Round2(measureb.Finite(measureb.Quantile(0.99, b)))}
	r.Reads = after.Sub(before).ReadsOf()
	r.StoreReads = r.Reads.Layer(measureb.StoreLayer)
	// Notices that had not reached the load tool when their delivery did
	// have had time since.
	if err := measureb.SleepCtx(ctx, 500*time.Millisecond); err != nil {
		return r, err
	}
	r.E2E, r.Fanout = ph.settle(e.load.clock)
	r.Seconds = measureb.Round2(el)
	r.PublishRate = measureb.Round2(float64(e.pub.pub.Sent.Load()-sent) / el)
	r.Expected = measureb.Round2(float64(e.fanoutOf(int(sent), int(e.pub.pub.Sent.Load()))) / el)
	r.Deliveries, r.Conflated = ph.deliveries.Load(), ph.conflated.Load()
	r.DeliveriesPerS = measureb.Round2(float64(r.Deliveries) / el)
	r.CPU = cpuEnd.UsageSince(cpu)
	r.NodeCPUSeconds = measureb.Round2(cpuEnd.Seconds["api"] - cpu.Seconds["api"])
	if r.Deliveries > 0 {
		r.CPUPerDelivUS = measureb.Round2(1e6 * (cpuEnd.Seconds["api"] - cpu.Seconds["api"]) / float64(r.Deliveries))
	}
	if mem, err := measureb.ReadProcMem(e.node.Pid()); err == nil {
		r.NodeRSSMB = mem.RSSMB
	}
	if r.IngestBacklog, err = world.IngestBacklog(ctx, e.sb); err != nil {
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

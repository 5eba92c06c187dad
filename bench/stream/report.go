package stream

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// Goals of issue 18 for streams (fan-out, CPU and ramp are against the anchor).
const (
	goalIdleConnBytes   = 20_000 // 20 KB
	goalRampP99MS       = 250.0
	goalStreamReadRatio = 0.50
)

// StreamAnchor is the reference, measured on the same 2-core machine:
// the engine under Centrifugo (centrifugal/centrifuge with its in-memory
// broker) in the same shape, load tool on the same cores. Its latency is
// publish → client with no database on the path, the work our fan-out
// figure measures.
var streamAnchor = StreamAnchor{
	What:             "centrifugal/centrifuge, in-memory broker: 5,000 connections × 20 of 2,000 channels, 1,000 publications/s",
	P50MS:            "4.3–4.7",
	P99MS:            "7.9–9.3",
	P50Num:           4.7,
	P99Num:           9.3,
	CPUPerDeliveryUS: 14.2,
	MemPerConnKiB:    40.6,
	MaxRate:          200_000,
	Ramp:             "3,000 pub/s: p99 108–121 ms; 5,000 pub/s: p99 207–358 ms",
}

// StreamAnchor is the reference figures shown beside ours.
type StreamAnchor struct {
	What  string `json:"what"`
	P50MS string `json:"publish_to_client_p50_ms"`
	P99MS string `json:"publish_to_client_p99_ms"`
	// P50Num and P99Num are the ranges' upper ends, what the goals use
	// when the anchor could not run.
	P50Num           float64 `json:"publish_to_client_p50_ms_upper"`
	P99Num           float64 `json:"publish_to_client_p99_ms_upper"`
	CPUPerDeliveryUS float64 `json:"cpu_per_delivery_us"`
	MemPerConnKiB    float64 `json:"memory_per_connection_kib"`
	MaxRate          float64 `json:"max_deliveries_per_s_p99_250ms"`
	Ramp             string  `json:"ramp"`
}

// StreamPhaseResult is one measured stretch of live deliveries.
type StreamPhaseResult struct {
	Name          string  `json:"name"`
	SubsPerConn   int     `json:"subscriptions_per_connection"`
	Subscriptions int     `json:"subscriptions"`
	Seconds       float64 `json:"seconds"`
	PublishRate   float64 `json:"publish_rate_per_s"`
	// Expected is the deliveries a second the updates published during the
	// phase make to the subscriptions (streamEnv.fanoutOf).
	Expected       float64 `json:"expected_deliveries_per_s"`
	Deliveries     int64   `json:"deliveries"`
	DeliveriesPerS float64 `json:"deliveries_per_s"`
	// Conflated are versions replaced by a newer one before the client
	// read them.
	Conflated int64        `json:"conflated_versions"`
	E2E       LatencyStats `json:"end_to_end"`
	Fanout    FanoutStats  `json:"fanout"`
	// NodeFanout is the node's own marketdata_stream_fanout_seconds over
	// the phase (notice arrival → message written, bucketed): a check on
	// Fanout, which the load tool measures from outside.
	NodeFanout measure.HistSummary `json:"node_fanout_metric"`
	// IngestBatch is ingest's marketdata_ingest_batch_messages over the
	// phase, p50 and p99 (messages a batch; a change notice carries a
	// batch's prices, so its fan-out is that many updates at once).
	IngestBatch [2]float64 `json:"ingest_batch_messages_p50_p99"`
	// NodeCPUSeconds is the API node's CPU time over the phase; CPUPerDelivUS
	// that over Deliveries.
	NodeCPUSeconds float64          `json:"node_cpu_seconds"`
	CPUPerDelivUS  float64          `json:"node_cpu_per_delivery_us"`
	CPU            measure.CPUUsage `json:"cpu"`
	NodeRSSMB      float64          `json:"node_rss_mb_end"`
	IngestBacklog  uint64           `json:"ingest_backlog_at_end"`
	// Reads are the node's data reads by resource and layer over the
	// phase (marketdata_reads_total); StoreReads those Postgres answered.
	Reads      measure.Reads `json:"reads_by_layer"`
	StoreReads float64       `json:"postgres_reads"`
}

// StreamMemory is the idle-connection measurement: the node before the
// connections and with all of them open and subscribed, no update flowing.
type StreamMemory struct {
	Conns          int     `json:"connections"`
	Subscriptions  int     `json:"subscriptions"`
	ConnectSeconds float64 `json:"connect_seconds"`
	// SubscribeSeconds runs from the first subscribe command to the last
	// snapshot price received.
	SubscribeSeconds float64         `json:"subscribe_seconds"`
	Before           measure.ProcMem `json:"before"`
	With             measure.ProcMem `json:"with_connections"`
	PerConnBytes     float64         `json:"rss_per_connection_bytes"`
	// HeapPerConnBytes and GoroutinesPerConn are the node's Go heap in use
	// and goroutines, the same difference over the connections.
	HeapPerConnBytes float64 `json:"heap_inuse_per_connection_bytes"`
	// StackPerConnBytes is the goroutine stacks' memory in use, the same
	// difference over the connections (the reader goroutine's stack).
	StackPerConnBytes float64 `json:"stack_inuse_per_connection_bytes"`
	GoroutinesPerConn float64 `json:"goroutines_per_connection"`
}

// StreamReads is the snapshot route's rate without streams (before they
// open and after they close) and with them open and flowing.
type StreamReads struct {
	Route   string             `json:"route"`
	Before  measure.LoadResult `json:"without_before"`
	After   measure.LoadResult `json:"without_after"`
	With    measure.LoadResult `json:"with_streams"`
	Ratio   float64            `json:"ratio"`
	CPUWith measure.CPUUsage   `json:"cpu_with"`
	// CPUWithout is the mean of the two runs without.
	CPUWithout measure.CPUUsage `json:"cpu_without_before"`
	// PerCoreRatio compares requests per second of node CPU: below 1 when
	// streams make each read dearer, not only take cores from reads.
	PerCoreRatio float64 `json:"per_node_core_ratio"`
	// During are the streams' figures during the run with them.
	During StreamPhaseResult `json:"streams_during"`
}

// StreamFaults are the broken promises of the whole run.
type StreamFaults struct {
	clientFaults
	// Lost counts (connection, market) pairs not at the market's newest
	// published version after the settle.
	Lost int64 `json:"lost"`
	// Repeats counts prices of a version the client already had (a
	// subscribe racing an update): allowed, shown.
	Repeats int64 `json:"repeated_versions"`
	// First are the first faults' descriptions.
	First []string `json:"first,omitempty"`
}

func (f StreamFaults) total() int64 {
	return f.Lost + f.SeqGaps + f.Backwards + f.Unsubscribed + f.Missing + f.Unknown + f.Errors + f.Unreadable + f.Disconnected
}

// StreamResult is bench-results/stream.json.
type StreamResult struct {
	Bench   string              `json:"bench"`
	Machine world.Machine       `json:"machine"`
	Params  StreamParams        `json:"params"`
	Load    world.ReadsLoad     `json:"load"`
	Memory  StreamMemory        `json:"idle_memory"`
	Steady  StreamPhaseResult   `json:"steady"`
	Ramp    []StreamPhaseResult `json:"ramp"`
	// MaxRate is the highest deliveries/s of a ramp step (the steady phase
	// included) with end-to-end p99 within goalRampP99MS.
	MaxRate float64      `json:"max_deliveries_per_s_p99_250ms"`
	Reads   StreamReads  `json:"reads"`
	Faults  StreamFaults `json:"faults"`
	// Refused counts subscribes the node answered "unavailable" (it could
	// not read their prices within its read timeout); each was sent again.
	Refused int64 `json:"subscribes_refused_unavailable"`
	// SettleSeconds is how long the clients took to go quiet once ingest
	// had applied the last update.
	SettleSeconds float64           `json:"settle_seconds"`
	Publish       world.PollPublish `json:"publish"`
	Ingest        world.IngestSide  `json:"ingest"`
	// Notices counts the change notices the load tool received; ones naming
	// unknown markets or that it could not decode are shown too.
	Notices       int64                     `json:"notices"`
	NoticeUnknown int64                     `json:"notice_unknown_markets"`
	NoticeBad     int64                     `json:"notices_undecodable"`
	Anchor        StreamAnchor              `json:"anchor_reference"`
	AnchorRun     AnchorResult              `json:"anchor"`
	Goals         []measure.GoalCheck       `json:"goals"`
	AllMet        bool                      `json:"all_met"`
	ChildLogs     map[string]string         `json:"child_logs"`
	ChildWarnings map[string]map[string]int `json:"child_warnings"`
	Seconds       float64                   `json:"seconds"`
}

// Failure makes mdbench exit non-zero after writing stream.json: a lost
// update, a version going backwards, a seq gap, or any other broken promise
// of the contract's streams; a missed speed goal is not one.
func (r *StreamResult) Failure() error {
	f := r.Faults
	if f.total() == 0 {
		return nil
	}
	return fmt.Errorf("%d lost updates, %d versions backwards, %d seq gaps, %d other faults (goal 0 each): %s",
		f.Lost, f.Backwards, f.SeqGaps, f.total()-f.Lost-f.Backwards-f.SeqGaps, strings.Join(f.First, "; "))
}

// anchorFigures are the anchor's figures the goals compare with: measured
// in this run when the anchor ran, else the reference (issue 10's run).
type anchorFigures struct {
	measured              bool
	p50, p99, cpu, perKiB float64
	maxRate               float64
	lost                  int64
	deliveries            float64
}

func (r *StreamResult) anchorFigures() anchorFigures {
	if a := r.AnchorRun.Steady; a != nil {
		return anchorFigures{measured: true, p50: a.P50MS, p99: a.P99MS, cpu: a.CPUPerDelivUS, perKiB: a.PerConnKiB,
			maxRate: r.AnchorRun.MaxRate, lost: a.Lost + a.Gaps + a.OutOfOrder, deliveries: a.DeliveriesPerS}
	}
	ref := r.Anchor
	return anchorFigures{p50: ref.P50Num, p99: ref.P99Num, cpu: ref.CPUPerDeliveryUS, perKiB: ref.MemPerConnKiB, maxRate: ref.MaxRate, lost: -1}
}

// summarise finds the highest rate of the ramp and checks the goals
// (issue 18: against the anchor measured in the same run).
func (r *StreamResult) summarise() {
	for _, s := range append([]StreamPhaseResult{r.Steady}, r.Ramp...) {
		if s.E2E.Count > 0 && s.E2E.P99MS <= goalRampP99MS {
			r.MaxRate = max(r.MaxRate, s.DeliveriesPerS)
		}
	}
	s, f, a := r.Steady, r.Faults, r.anchorFigures()
	of := "the anchor's in this run"
	if !a.measured {
		of = "the anchor's reference (NOT RUN)"
	}
	r.Goals = []measure.GoalCheck{
		{Goal: fmt.Sprintf("fan-out p99 ≤ %s (%.2f ms)", of, a.p99), Value: s.Fanout.P99MS, Met: s.Fanout.Count > 0 && s.Fanout.P99MS <= a.p99},
		{Goal: fmt.Sprintf("node CPU per delivery ≤ %s (%.2f µs)", of, a.cpu), Value: s.CPUPerDelivUS, Met: s.Deliveries > 0 && s.CPUPerDelivUS <= a.cpu},
		{Goal: "node memory per idle connection ≤ 20 KB (bytes)", Value: r.Memory.PerConnBytes, Met: r.Memory.PerConnBytes <= goalIdleConnBytes},
		{Goal: "lost updates = 0", Value: float64(f.Lost), Met: f.Lost == 0},
		{Goal: "versions backwards = 0", Value: float64(f.Backwards), Met: f.Backwards == 0},
		{Goal: "seq gaps = 0", Value: float64(f.SeqGaps), Met: f.SeqGaps == 0},
		{Goal: fmt.Sprintf("deliveries/s with p99 ≤ %.0f ms ≥ %s (%.0f)", goalRampP99MS, of, a.maxRate), Value: r.MaxRate, Met: r.MaxRate > 0 && r.MaxRate >= a.maxRate},
		{Goal: fmt.Sprintf("snapshot reads with streams ≥ %.2f× without", goalStreamReadRatio), Value: r.Reads.Ratio, Met: r.Reads.Ratio >= goalStreamReadRatio},
	}
	r.AllMet = f.total() == 0 && a.measured
	for _, g := range r.Goals {
		r.AllMet = r.AllMet && g.Met
	}
}

// Print writes the figures beside the anchor's, the ramp and the rest.
func (r *StreamResult) Print() {
	m, p, s, a, mem := r.Machine, r.Params, r.Steady, r.Anchor, r.Memory
	fmt.Printf("\nstream benchmark — %d cores, %s, %s, bin %q, load at start %s\n",
		m.NumCPU, m.GoVersion, m.Date.Format("2006-01-02 15:04 MST"), m.BinVersion, m.LoadAvg)
	fmt.Printf("one API node; %d WebSocket connections (keys of %d accounts, %d each) × %d markets drawn from a hot set of %d; %.0f price updates/s through NATS → ingest; load tool on the same cores\n",
		p.Conns, p.Accounts, p.PerAccount, p.Subs, p.Hot, p.Rate)
	ar, af := r.AnchorRun, r.anchorFigures()
	anchorCol := "anchor, this run"
	if ar.Steady != nil {
		fmt.Printf("anchor: %s, built from %s in %.0f s, run first in the same shape (%d connections × %d of %d channels, %.0f publications/s) by its own load tool; its latency is publish → client with no database on the path\n",
			"centrifugal/centrifuge, in-memory broker", ar.Dir, ar.BuildSeconds, p.Conns, p.Subs, p.Hot, p.Rate)
	} else {
		anchorCol = "anchor REFERENCE (not run)"
		fmt.Printf("ANCHOR NOT RUN: %s\nthe anchor column shows the reference figures of another day: %s\n", ar.NotRun, a.What)
	}
	g := func(i int) string { return measure.Met(r.Goals[i].Met) }
	anchorLost := "—"
	if ar.Steady != nil {
		anchorLost = fmt.Sprintf("%d / %d / %d (lost / version gaps / out of order)", ar.Steady.Lost, ar.Steady.Gaps, ar.Steady.OutOfOrder)
	}
	anchorDeliv := "—"
	if ar.Steady != nil {
		anchorDeliv = fmt.Sprintf("%.0f (%.0f; publisher %.0f of %.0f/s)", ar.Steady.DeliveriesPerS, ar.Steady.ExpectedPerS(), ar.Steady.PubRate, ar.Steady.Rate)
	}
	tw := measure.NewTable()
	tw.Rowf("figure\tours\t%s\tgoal\t\n", anchorCol)
	tw.Rowf("fan-out p50 / p99 (ours: notice at the load tool → client; anchor: publish → client)\t%.2f / %.2f ms\t%.2f / %.2f ms\tp99 ≤ anchor's\t%s\n",
		s.Fanout.P50MS, s.Fanout.P99MS, af.p50, af.p99, g(0))
	tw.Rowf("end to end p50 / p99 (NATS publish → client, ingest's commit included)\t%.2f / %.2f ms\t— (no database)\t\t\n", s.E2E.P50MS, s.E2E.P99MS)
	tw.Rowf("deliveries/s (expected)\t%.0f (%.0f)\t%s\t\t\n", s.DeliveriesPerS, s.Expected, anchorDeliv)
	tw.Rowf("server CPU per delivery\t%.2f µs\t%.2f µs\t≤ anchor's\t%s\n", s.CPUPerDelivUS, af.cpu, g(1))
	tw.Rowf("memory per idle connection (RSS)\t%.1f KiB\t%.1f KiB\t≤ 20 KB (19.5 KiB)\t%s\n", mem.PerConnBytes/1024, af.perKiB, g(2))
	tw.Rowf("lost / versions backwards / seq gaps\t%d / %d / %d\t%s\t0 / 0 / 0\t%s\n",
		r.Faults.Lost, r.Faults.Backwards, r.Faults.SeqGaps, anchorLost, measure.Met(r.Goals[3].Met && r.Goals[4].Met && r.Goals[5].Met))
	tw.Rowf("highest deliveries/s with p99 ≤ %.0f ms (ours e2e, anchor publish → client)\t%.0f\t%.0f\t≥ anchor's\t%s\n", goalRampP99MS, r.MaxRate, af.maxRate, g(6))
	tw.Rowf("snapshot requests/s with streams / without\t%.0f / %.0f = %.2f\t—\t≥ %.2f\t%s\n",
		r.Reads.With.RPS, (r.Reads.Before.RPS+r.Reads.After.RPS)/2, r.Reads.Ratio, goalStreamReadRatio, g(7))
	tw.Print()
	if ar.Steady != nil {
		fmt.Printf("\nanchor ramp at %.0f publications/s (fresh anchor a step, %gs warm-up + %gs measured)\n", p.Rate, p.StepWarmupS, p.StepS)
		tw = measure.NewTable()
		tw.Rowf("%s\n", "run\tsubs/conn\tpublications/s\tdeliveries/s (expected)\tpublish → client p50/p99/max ms\tfrom due p99 ms\tserver µs/delivery\tcores server/load tool\tKiB/conn\tlost\tp99 ≤ 250 ms")
		for _, x := range append([]AnchorRun{*ar.Steady}, ar.Ramp...) {
			tw.Rowf("%s\t%d\t%.0f of %.0f\t%.0f (%.0f)\t%.2f / %.2f / %.2f\t%.2f\t%.2f\t%.2f/%.2f\t%.1f\t%d\t%s\n",
				x.Name, x.SubsPerConn, x.PubRate, x.Rate, x.DeliveriesPerS, x.ExpectedPerS(), x.P50MS, x.P99MS, x.MaxMS, x.FromDueP99MS, x.CPUPerDelivUS,
				x.ServerCores, x.LoadCores, x.PerConnKiB, x.Lost, yesNo(x.P99MS <= goalRampP99MS))
		}
		tw.Print()
		if ar.RampError != "" {
			fmt.Printf("anchor ramp stopped: %s\n", ar.RampError)
		}
	}
	if b := ar.BesidePipeline; b != nil {
		c := ar.BesideCores
		fmt.Printf("\nthe anchor beside our pipeline (its steady shape again, while %.0f updates/s flow through NATS → ingest → Postgres → Redis → our node's notices, our streams closed): "+
			"publish → client p50 %.2f / p99 %.2f ms (quiet: %.2f / %.2f), %.2f µs a delivery; cores: anchor %.2f, its load tool %.2f, nats-server %.2f, ingest %.2f, postgres %.2f, redis-server %.2f, our node %.2f, mdbench %.2f; machine %.0f%% busy\n",
			p.Rate, b.P50MS, b.P99MS, af.p50, af.p99, b.CPUPerDelivUS, b.ServerCores, b.LoadCores,
			c["nats-server"], c["ingest"], c["postgres"], c["redis-server"], c["api"], c["mdbench"], ar.BesideBusyPct)
		fmt.Printf("ours against the anchor beside the same pipeline: fan-out p99 %.2f ms against %.2f ms (%s)\n", s.Fanout.P99MS, b.P99MS,
			map[bool]string{true: "at or under it", false: "over it"}[s.Fanout.Count > 0 && s.Fanout.P99MS <= b.P99MS])
	} else if ar.BesideError != "" {
		fmt.Printf("\nthe anchor beside our pipeline did not run: %s\n", ar.BesideError)
	}

	fmt.Printf("\nramp at %.0f updates/s (anchor reference: %s)\n", p.Rate, a.Ramp)
	tw = measure.NewTable()
	tw.Rowf("%s\n", "step\tsubs/conn\tsubscribers/market\tdeliveries/s (expected)\te2e p50/p99 ms\tfan-out p50/p99 ms\tnode's fan-out metric p50/p99 ms\tingest batch p50/p99 msgs\tconflated\tnode µs/delivery\tcores api/ingest/gen\tnode RSS MB\tp99 ≤ 250 ms")
	for _, st := range append([]StreamPhaseResult{s}, r.Ramp...) {
		c := st.CPU.Cores
		tw.Rowf("%s\t%d\t%.0f\t%.0f (%.0f)\t%.2f / %.2f\t%.2f / %.2f\t%.2f / %.2f\t%.0f / %.0f\t%d\t%.2f\t%.2f/%.2f/%.2f\t%.0f\t%s\n",
			st.Name, st.SubsPerConn, float64(st.Subscriptions)/float64(p.Hot), st.DeliveriesPerS, st.Expected,
			st.E2E.P50MS, st.E2E.P99MS, st.Fanout.P50MS, st.Fanout.P99MS, st.NodeFanout.P50MS, st.NodeFanout.P99MS,
			st.IngestBatch[0], st.IngestBatch[1], st.Conflated, st.CPUPerDelivUS,
			c["api"], c["ingest"], c["mdbench"], st.NodeRSSMB, yesNo(st.E2E.Count > 0 && st.E2E.P99MS <= goalRampP99MS))
	}
	tw.Print()

	fmt.Printf("\nidle: %d connections opened in %.1f s, %d subscriptions acknowledged and snapshotted in %.1f s (%d subscribes over the run refused \"unavailable\" and sent again); node VmRSS %.1f → %.1f MB (%.0f B a connection; Go heap in use %.0f B, goroutine stacks %.0f B and %.2f goroutines a connection)\n",
		mem.Conns, mem.ConnectSeconds, mem.Subscriptions, mem.SubscribeSeconds, r.Refused, mem.Before.RSSMB, mem.With.RSSMB,
		mem.PerConnBytes, mem.HeapPerConnBytes, mem.StackPerConnBytes, mem.GoroutinesPerConn)
	rd := r.Reads
	fmt.Printf("reads: %s, %d connections: %.0f rps before the streams, %.0f after, %.0f with them (p99 %.2f / %.2f / %.2f ms); node cores without %.2f, with %.2f; per node core %.2f×\n",
		rd.Route[:min(len(rd.Route), 60)]+"…", rd.With.Conns, rd.Before.RPS, rd.After.RPS, rd.With.RPS, rd.Before.P99MS, rd.After.P99MS, rd.With.P99MS,
		rd.CPUWithout.Cores["api"], rd.CPUWith.Cores["api"], rd.PerCoreRatio)
	fmt.Printf("streams during the reads: %.0f deliveries/s, e2e p99 %.2f ms, fan-out p99 %.2f ms\n",
		rd.During.DeliveriesPerS, rd.During.E2E.P99MS, rd.During.Fanout.P99MS)
	fmt.Printf("POSTGRES READS BY THE API NODE: steady %.0f, with the snapshot reads %.0f (goal 0)\n", s.StoreReads, rd.During.StoreReads)
	fmt.Printf("reads by layer, steady: %s\n", s.Reads)
	fmt.Printf("reads by layer, with the snapshot reads: %s\n", rd.During.Reads)
	f := r.Faults
	fmt.Printf("faults: lost %d, backwards %d, seq gaps %d, prices not subscribed %d, missing in acks %d, never-published versions %d, error messages %d, unreadable %d, disconnected %d; repeated versions %d (allowed); settled in %.1f s\n",
		f.Lost, f.Backwards, f.SeqGaps, f.Unsubscribed, f.Missing, f.Unknown, f.Errors, f.Unreadable, f.Disconnected, f.Repeats, r.SettleSeconds)
	for _, msg := range f.First {
		fmt.Printf("fault: %s\n", msg)
	}
	fmt.Printf("fan-out (steady): %d deliveries before the load tool had their notice (0 ms), %d with no notice after their publish; notices %d (%d unknown markets, %d undecodable)\n",
		s.Fanout.BeforeNotice, s.Fanout.NoNotice, r.Notices, r.NoticeUnknown, r.NoticeBad)
	pb, ig := r.Publish, r.Ingest
	fmt.Printf("publisher: %d updates in %.1f s of publishing (%.0f/s, target %.0f/s); ingest: %.0f applied, %.0f ignored, %.0f failures, freshness p50 %.1f / p99 %.1f ms; Postgres CPU per applied update %.1f µs (this run's backends: %s)\n",
		pb.Sent, pb.Seconds, pb.Rate, pb.Target, ig.Applied, ig.Ignored, ig.Failures, ig.Freshness.P50MS, ig.Freshness.P99MS, ig.PGPerAppliedUS, ig.PG)
	for _, name := range slices.Sorted(maps.Keys(r.ChildWarnings)) {
		w := r.ChildWarnings[name]
		for _, msg := range slices.Sorted(maps.Keys(w)) {
			fmt.Printf("%s log: %d × %s\n", name, w[msg], msg)
		}
	}
	for _, g := range r.Goals {
		fmt.Printf("goal: %-50s %11.2f  %s\n", g.Goal, g.Value, measure.Met(g.Met))
	}
	verdict := "all goals met"
	if !r.AllMet {
		verdict = "GOALS NOT MET (see above)"
	}
	fmt.Printf("stream: %s in %.0f s; logs %s\n\n", verdict, r.Seconds, strings.Join(slices.Sorted(maps.Values(r.ChildLogs)), ", "))
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

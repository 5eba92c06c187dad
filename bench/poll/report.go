package poll

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/marketdata/marketdata/bench/baseline"
	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// PollInputs describes the watchlists and the bodies of their answers.
type PollInputs struct {
	DistinctWatched int     `json:"distinct_markets_watched"`
	WatchedShare    float64 `json:"share_of_markets_watched"`
	MostWatchers    int     `json:"most_watchers_of_a_market"`
	MedianWatchers  int     `json:"median_watchers_of_a_watched_market"`
	// BodyBytes is the min, median and max size of the API's 200 answers
	// at the start, which the bare baseline serves.
	BodyBytes [3]int `json:"body_bytes_min_median_max"`
}

// PollRound is one bare run and the API run after it.
type PollRound struct {
	Bare  PollRun `json:"bare"`
	API   PollRun `json:"api"`
	Ratio float64 `json:"ratio"`
	// Staleness and regressions are of the API run (regressions over all
	// its answers, warm-up included).
	Staleness        StalenessStats   `json:"staleness"`
	Regressions      int64            `json:"regressions"`
	FirstRegressions []Regression     `json:"first_regressions,omitempty"`
	CPUBare          measure.CPUUsage `json:"cpu_bare_run"`
	CPUAPI           measure.CPUUsage `json:"cpu_api_run"`
	// MaxRSSMB is each node's highest VmRSS sampled during the API run.
	MaxRSSMB map[string]float64 `json:"api_max_rss_mb"`
	// PublishRate and IngestApplied are the updates published and the
	// prices ingest applied per second during the API run (applied is
	// lower when a batch holds several versions of a market: only the
	// newest is written); IngestBacklog is what ingest had not yet
	// acknowledged at its end: at 5,000/s, 5,000 is a second behind.
	PublishRate     float64             `json:"publish_rate_per_s"`
	IngestApplied   float64             `json:"ingest_applied_per_s"`
	IngestBacklog   uint64              `json:"ingest_backlog_at_end"`
	IngestFreshness measure.HistSummary `json:"ingest_freshness_metric"`
	// IngestFreshnessBare is ingest's freshness metric over the bare run:
	// the same pollers and publisher, a server that does nothing in the
	// API's place. No API can leave ingest more of the machine than that.
	IngestFreshnessBare measure.HistSummary `json:"ingest_freshness_metric_bare_run"`
	// Answer is the answer staleness of the API run's measured answers
	// (200 and 304), Cadence the time between a poller's requests.
	Answer  AnswerStalenessStats `json:"answer_staleness"`
	Cadence CadenceStats         `json:"poll_cadence"`
	// Reads are the API nodes' data reads by resource and layer
	// (marketdata_reads_total) over the API run, both nodes;
	// StoreReads those answered by Postgres, per node (goal 0).
	Reads           measure.Reads      `json:"reads_by_layer"`
	StoreReads      map[string]float64 `json:"postgres_reads_by_node"`
	StoreReadsTotal float64            `json:"postgres_reads"`
	// LimitsAlone are the limit decisions both nodes made without Redis
	// (marketdata_ratelimit_decided_alone_total) over the measured part:
	// Redis is up throughout, so the goal is 0 (a slow Redis is not down).
	LimitsAlone float64 `json:"limits_decided_alone"`
	// LimitsAloneUnknown: a node did not export the metric (a binary from
	// before it); LimitsAlone then says nothing.
	LimitsAloneUnknown bool `json:"limits_decided_alone_unknown,omitempty"`
	// PG is the Postgres CPU of the run's own backends by child over the
	// API run's measured part; PGPerAppliedUS is ingest's backends' µs
	// per applied price over the whole API run (as IngestApplied).
	PG             *world.PGCPU `json:"postgres_cpu,omitempty"`
	PGPerAppliedUS float64      `json:"postgres_cpu_per_applied_update_us"`
	// CandleClose: ingest closed a 5m candle bucket during the API run (the
	// fold's mark moved); a close of the world's load is one statement of
	// seconds, which the round's Postgres CPU includes.
	CandleClose bool `json:"candle_close"`
}

// PollSummary is the medians of the rounds (sums for the counts).
type PollSummary struct {
	Ratio    float64 `json:"ratio_median"`
	APIRPS   float64 `json:"api_polls_per_s_median"`
	BareRPS  float64 `json:"bare_polls_per_s_median"`
	APIP50MS float64 `json:"api_p50_ms_median"`
	APIP99MS float64 `json:"api_p99_ms_median"`
	// BareP99MS is the bare server's own p99 under the same background
	// load: the floor of any server's p99 on this machine in this run.
	BareP99MS   float64 `json:"bare_p99_ms_median"`
	Frac304     float64 `json:"fraction_304_median"`
	StaleP50MS  float64 `json:"staleness_p50_ms_median"`
	StaleP99MS  float64 `json:"staleness_p99_ms_median"`
	StaleBeyond bool    `json:"staleness_p99_beyond_grace"`
	Stale50Out  bool    `json:"staleness_p50_beyond_grace"`
	Pairs       int64   `json:"staleness_pairs"`
	NotSeen     int64   `json:"staleness_pairs_not_seen_in_run"`
	Errors      int64   `json:"api_errors"`
	BareErrors  int64   `json:"bare_errors"`
	Regressions int64   `json:"regressions"`
	// GeneratorCores is this process (pollers and publisher) during the
	// API runs, median.
	GeneratorCores float64 `json:"generator_cores_median"`
	// MaxRSSMB is each node's highest VmRSS over every API run.
	MaxRSSMB map[string]float64 `json:"api_max_rss_mb"`
	// Answer staleness and poll cadence, medians of the rounds (the max
	// is the highest of any round).
	AnswerP50MS  float64 `json:"answer_staleness_p50_ms_median"`
	AnswerP99MS  float64 `json:"answer_staleness_p99_ms_median"`
	AnswerMaxMS  float64 `json:"answer_staleness_max_ms"`
	CadenceP50MS float64 `json:"poll_cadence_p50_ms_median"`
	CadenceP99MS float64 `json:"poll_cadence_p99_ms_median"`
	// RoundRegressions and RoundErrors are each round's counts: the goal
	// is 0 in every round.
	RoundRegressions []int64 `json:"regressions_per_round"`
	RoundErrors      []int64 `json:"failed_polls_per_round"`
	// StoreReads are the API nodes' Postgres reads over every round's
	// measured part, RoundStoreReads per round (goal 0).
	StoreReads      float64   `json:"postgres_reads_by_api_nodes"`
	RoundStoreReads []float64 `json:"postgres_reads_by_api_nodes_per_round"`
	// LimitsAlone and RoundLimitsAlone: limit decisions the API nodes made
	// without Redis, over every round's measured part and per round (goal 0).
	LimitsAlone      float64   `json:"limits_decided_alone"`
	RoundLimitsAlone []float64 `json:"limits_decided_alone_per_round"`
	// LimitsAloneUnknown: some round's nodes did not export the count.
	LimitsAloneUnknown bool `json:"limits_decided_alone_unknown,omitempty"`
	// Reads are every round's reads by resource and layer, summed.
	Reads measure.Reads `json:"reads_by_layer"`
	// PGPerAppliedUS is ingest's Postgres backends' CPU per applied price,
	// APIPGCores the API nodes' backends' cores, medians of the rounds.
	PGPerAppliedUS float64 `json:"postgres_cpu_per_applied_update_us_median"`
	APIPGCores     float64 `json:"api_postgres_backend_cores_median"`
	// Ingest's freshness metric p99 over the API runs and over the bare
	// runs (medians of the rounds), and its largest backlog at a round's
	// end.
	IngestP99MS     float64 `json:"ingest_freshness_p99_ms_median"`
	IngestBareP99MS float64 `json:"ingest_freshness_p99_ms_bare_runs_median"`
	MaxBacklog      uint64  `json:"ingest_backlog_at_round_end_max"`
}

// PollResult is bench-results/poll.json.
type PollResult struct {
	Bench   string            `json:"bench"`
	Machine world.Machine     `json:"machine"`
	Params  PollParams        `json:"params"`
	Load    world.ReadsLoad   `json:"load"`
	Inputs  PollInputs        `json:"inputs"`
	Rounds  []PollRound       `json:"rounds"`
	Summary PollSummary       `json:"summary"`
	Publish world.PollPublish `json:"publish"`
	Ingest  world.IngestSide  `json:"ingest"`
	// Quiet is ingest's freshness metric with the publisher running and
	// no pollers, before the rounds: ingest's figure on this machine with
	// nothing of the poll load beside it.
	Quiet measure.HistSummary `json:"ingest_freshness_metric_quiet"`
	// Backlog is what ingest had not acknowledged once the publisher
	// stopped: the benchmark does not wait for it.
	Backlog uint64       `json:"ingest_backlog_at_end"`
	Shown   []Regression `json:"first_regressions,omitempty"`
	// Mem is each API node's memory after the rounds; VmHWM is its peak
	// since it started.
	Mem           map[string]measure.ProcMem `json:"api_mem_end"`
	Goals         []measure.GoalCheck        `json:"goals"`
	AllMet        bool                       `json:"all_met"`
	ChildLogs     map[string]string          `json:"child_logs"`
	ChildWarnings map[string]map[string]int  `json:"child_warnings"`
	Seconds       float64                    `json:"seconds"`
}

// Failure makes mdbench exit non-zero after writing poll.json: a version
// regression or a failed poll breaks what the contract promises, unlike a
// speed goal missed on a shared machine.
func (r *PollResult) Failure() error {
	if s := r.Summary; s.Regressions > 0 || s.Errors > 0 {
		return fmt.Errorf("%d version regressions (per round %v) and %d failed polls (per round %v); goal 0 each in every round",
			s.Regressions, s.RoundRegressions, s.Errors, s.RoundErrors)
	}
	return nil
}

// summarise computes the medians and the goals from the rounds.
func (r *PollResult) summarise() {
	s := PollSummary{MaxRSSMB: map[string]float64{}}
	of := func(f func(PollRound) float64) float64 {
		xs := make([]float64, len(r.Rounds))
		for i, rd := range r.Rounds {
			xs[i] = f(rd)
		}
		return baseline.Median(xs)
	}
	s.Ratio = of(func(x PollRound) float64 { return x.Ratio })
	s.APIRPS = of(func(x PollRound) float64 { return x.API.RPS })
	s.BareRPS = of(func(x PollRound) float64 { return x.Bare.RPS })
	s.APIP50MS = of(func(x PollRound) float64 { return x.API.P50MS })
	s.APIP99MS = of(func(x PollRound) float64 { return x.API.P99MS })
	s.BareP99MS = of(func(x PollRound) float64 { return x.Bare.P99MS })
	s.Frac304 = of(func(x PollRound) float64 { return x.API.Frac304 })
	// A round whose percentile is past the grace ranks above every other.
	out := func(v float64, beyond bool) float64 {
		if beyond {
			return math.Inf(1)
		}
		return v
	}
	s.StaleP50MS = of(func(x PollRound) float64 { return out(x.Staleness.P50MS, x.Staleness.P50Beyond) })
	s.StaleP99MS = of(func(x PollRound) float64 { return out(x.Staleness.P99MS, x.Staleness.Beyond) })
	if s.Stale50Out = math.IsInf(s.StaleP50MS, 1); s.Stale50Out {
		s.StaleP50MS = 1000 * r.Params.GraceS
	}
	if s.StaleBeyond = math.IsInf(s.StaleP99MS, 1); s.StaleBeyond {
		s.StaleP99MS = 1000 * r.Params.GraceS
	}
	s.GeneratorCores = of(func(x PollRound) float64 { return x.CPUAPI.Cores["mdbench"] })
	s.AnswerP50MS = of(func(x PollRound) float64 { return x.Answer.P50MS })
	s.AnswerP99MS = of(func(x PollRound) float64 { return x.Answer.P99MS })
	s.CadenceP50MS = of(func(x PollRound) float64 { return x.Cadence.P50MS })
	s.CadenceP99MS = of(func(x PollRound) float64 { return x.Cadence.P99MS })
	s.PGPerAppliedUS = of(func(x PollRound) float64 { return x.PGPerAppliedUS })
	s.APIPGCores = of(func(x PollRound) float64 {
		if x.PG == nil {
			return 0
		}
		var c float64
		for _, n := range pollNames {
			c += x.PG.Cores[n]
		}
		return c
	})
	s.IngestP99MS = of(func(x PollRound) float64 { return x.IngestFreshness.P99MS })
	s.IngestBareP99MS = of(func(x PollRound) float64 { return x.IngestFreshnessBare.P99MS })
	s.Reads = measure.Reads{}
	for i, rd := range r.Rounds {
		s.MaxBacklog = max(s.MaxBacklog, rd.IngestBacklog)
		s.AnswerMaxMS = max(s.AnswerMaxMS, rd.Answer.MaxMS)
		s.RoundRegressions = append(s.RoundRegressions, rd.Regressions)
		s.RoundErrors = append(s.RoundErrors, rd.API.Errors)
		s.RoundStoreReads = append(s.RoundStoreReads, rd.StoreReadsTotal)
		s.StoreReads += rd.StoreReadsTotal
		s.RoundLimitsAlone = append(s.RoundLimitsAlone, rd.LimitsAlone)
		s.LimitsAlone += rd.LimitsAlone
		s.LimitsAloneUnknown = s.LimitsAloneUnknown || rd.LimitsAloneUnknown
		s.Reads.Add(rd.Reads)
		s.Pairs += rd.Staleness.Pairs
		s.NotSeen += rd.Staleness.Late + rd.Staleness.Unseen
		s.Errors += rd.API.Errors
		s.BareErrors += rd.Bare.Errors
		s.Regressions += rd.Regressions
		for n, v := range rd.MaxRSSMB {
			s.MaxRSSMB[n] = max(s.MaxRSSMB[n], v)
		}
		for _, g := range rd.FirstRegressions {
			if len(r.Shown) < measure.MaxRegressionsKept {
				g.Round = i + 1
				r.Shown = append(r.Shown, g)
			}
		}
	}
	r.Summary = s
	hwm := 0.0
	for _, m := range r.Mem {
		hwm = max(hwm, m.HWMMB)
	}
	r.Goals = []measure.GoalCheck{
		{Goal: fmt.Sprintf("polls ≥ %.2f× bare (median ratio)", goalPollRatio), Value: s.Ratio, Met: s.Ratio >= goalPollRatio},
		{Goal: fmt.Sprintf("poll p99 ≤ %.0f ms", goalPollP99MS), Value: s.APIP99MS, Met: s.APIP99MS <= goalPollP99MS},
		{Goal: fmt.Sprintf("answer staleness p99 ≤ %.0f ms", goalPollStaleP99MS), Value: s.AnswerP99MS, Met: s.AnswerP99MS <= goalPollStaleP99MS},
		{Goal: "version regressions = 0 (every round)", Value: float64(s.Regressions), Met: s.Regressions == 0},
		{Goal: "failed polls = 0 (every round)", Value: float64(s.Errors), Met: s.Errors == 0},
		{Goal: "Postgres reads by API nodes = 0", Value: s.StoreReads, Met: s.StoreReads == 0},
		limitsAloneGoal(s),
		{Goal: fmt.Sprintf("API RSS (VmHWM, both nodes) ≤ %.0f MB", goalPollRSSMB), Value: hwm, Met: hwm <= goalPollRSSMB},
		{Goal: fmt.Sprintf("ingest backlog at each round's end ≤ %.0f (1 s)", r.Params.Rate), Value: float64(s.MaxBacklog), Met: float64(s.MaxBacklog) <= r.Params.Rate},
		{Goal: fmt.Sprintf("ingest freshness p99 ≤ %.0f ms", goalIngestFreshP99MS), Value: s.IngestP99MS, Met: s.IngestP99MS <= goalIngestFreshP99MS},
	}
	if r.Rounds[0].PG != nil {
		r.Goals = append(r.Goals, measure.GoalCheck{Goal: fmt.Sprintf("Postgres CPU per applied update ≤ %.0f µs", world.GoalPGPerAppliedUS), Value: s.PGPerAppliedUS, Met: s.PGPerAppliedUS <= world.GoalPGPerAppliedUS})
	}
	r.AllMet = true
	for _, g := range r.Goals {
		r.AllMet = r.AllMet && g.Met
	}
}

// Print writes the rounds' table and the rest of the figures on stdout.
func (r *PollResult) Print() {
	m, p, in, s := r.Machine, r.Params, r.Inputs, r.Summary
	fmt.Printf("\npoll benchmark — %d cores, %s, %s, bin %q, load at start %s\n",
		m.NumCPU, m.GoVersion, m.Date.Format("2006-01-02 15:04 MST"), m.BinVersion, m.LoadAvg)
	fmt.Printf("%d pollers × %d ids over %d markets (Zipf s=%g v=%g: %d markets watched, the most by %d pollers), keys of %d accounts\n",
		p.Pollers, p.IDs, p.Markets, p.ZipfS, p.ZipfV, in.DistinctWatched, in.MostWatchers, p.Accounts)
	fmt.Printf("%d connections, half to each API node; a poller's polls alternate nodes with If-None-Match = its last ETag\n", p.Conns)
	fmt.Printf("bare: one Fiber process, the same connections and loop, each watchlist's body the API's first 200 answer (%d/%d/%d bytes min/median/max), no conditional requests\n",
		in.BodyBytes[0], in.BodyBytes[1], in.BodyBytes[2])
	fmt.Printf("%.0f price updates/s through NATS → ingest during every run; rounds of %gs warm-up + %gs measured per side; staleness counts updates published up to %gs before a run ends\n",
		p.Rate, p.WarmupS, p.RunS, p.GraceS)
	tw := measure.NewTable()
	tw.Rowf("%s\n", "round\tapi polls/s\tbare polls/s\tratio\tapi p50/p99 ms\t304s\tapi errors\tpublish→seen p50/p99 ms\tpairs\tnot seen\tregressions\tpublished/applied/backlog\tcores api-a/api-b/ingest/gen\trss a/b MB")
	for i, rd := range r.Rounds {
		st := rd.Staleness
		c := rd.CPUAPI.Cores
		tw.Rowf("%d\t%.0f\t%.0f\t%.2f\t%.2f / %.2f\t%.1f%%\t%d\t%s / %s\t%d\t%d\t%d\t%.0f/%.0f/%d\t%.2f/%.2f/%.2f/%.2f\t%.0f/%.0f\n",
			i+1, rd.API.RPS, rd.Bare.RPS, rd.Ratio, rd.API.P50MS, rd.API.P99MS, 100*rd.API.Frac304, rd.API.Errors,
			staleFmt(st.P50MS, st.P50Beyond), staleFmt(st.P99MS, st.Beyond), st.Pairs, st.Late+st.Unseen, rd.Regressions,
			rd.PublishRate, rd.IngestApplied, rd.IngestBacklog,
			c[pollNames[0]], c[pollNames[1]], c["ingest"], c["mdbench"], rd.MaxRSSMB[pollNames[0]], rd.MaxRSSMB[pollNames[1]])
	}
	tw.Rowf("median\t%.0f\t%.0f\t%.2f\t%.2f / %.2f\t%.1f%%\t%d (sum)\t%s / %s\t%d (sum)\t%d (sum)\t%d (sum)\t\tgen %.2f\t%.0f/%.0f (max)\n",
		s.APIRPS, s.BareRPS, s.Ratio, s.APIP50MS, s.APIP99MS, 100*s.Frac304, s.Errors, staleFmt(s.StaleP50MS, s.Stale50Out), staleFmt(s.StaleP99MS, s.StaleBeyond),
		s.Pairs, s.NotSeen, s.Regressions, s.GeneratorCores, s.MaxRSSMB[pollNames[0]], s.MaxRSSMB[pollNames[1]])
	tw.Print()
	fmt.Println("answer staleness: per (answer, market), request start − publish of the newest version published before it that the answer does not show (0 if current); cadence: time between a poller's requests")
	tw = measure.NewTable()
	tw.Rowf("%s\n", "round\tREGRESSIONS\tFAILED POLLS\tanswer staleness p50/p99/max ms\tstale pairs\tcadence p50/p99/max ms\tPOSTGRES READS a/b\tpg cpu: ingest µs/applied, api-a/api-b/ingest/other cores")
	for i, rd := range r.Rounds {
		an, cd := rd.Answer, rd.Cadence
		tw.Rowf("%d\t%d\t%d\t%.1f / %.1f / %.1f\t%.2f%% of %d\t%.1f / %.1f / %.1f\t%.0f / %.0f\t%s\n",
			i+1, rd.Regressions, rd.API.Errors, an.P50MS, an.P99MS, an.MaxMS, 100*an.StaleShare, an.Pairs,
			cd.P50MS, cd.P99MS, cd.MaxMS, rd.StoreReads[pollNames[0]], rd.StoreReads[pollNames[1]], pgRoundCell(rd))
	}
	tw.Rowf("median\t%d (sum)\t%d (sum)\t%.1f / %.1f / %.1f (max)\t\t%.1f / %.1f\t%.0f (sum)\t%.1f µs; api %.2f cores\n",
		s.Regressions, s.Errors, s.AnswerP50MS, s.AnswerP99MS, s.AnswerMaxMS, s.CadenceP50MS, s.CadenceP99MS,
		s.StoreReads, s.PGPerAppliedUS, s.APIPGCores)
	tw.Print()
	verdict := "OK: 0 in every round"
	if s.Regressions > 0 || s.Errors > 0 {
		verdict = "BROKEN PROMISE"
	}
	fmt.Printf("CORRECTNESS: version regressions per round %v, failed polls per round %v — %s\n",
		s.RoundRegressions, s.RoundErrors, verdict)
	fmt.Printf("POSTGRES READS BY API NODES (store layer, measured parts): %.0f per round %v (goal 0)\n", s.StoreReads, s.RoundStoreReads)
	if s.LimitsAloneUnknown {
		fmt.Println("LIMITS DECIDED WITHOUT REDIS BY API NODES: not reported by this binary (no marketdata_ratelimit_decided_alone_total); its log's \"decided by this node alone\" warnings count them")
	} else {
		fmt.Printf("LIMITS DECIDED WITHOUT REDIS BY API NODES (measured parts; Redis up throughout): %.0f per round %v (goal 0)\n", s.LimitsAlone, s.RoundLimitsAlone)
	}
	fmt.Printf("reads by layer (both nodes, every round's measured part): %s\n", s.Reads)
	for i, rd := range r.Rounds {
		if rd.PG != nil {
			fmt.Printf("round %d postgres backends of this run: %s\n", i+1, rd.PG)
		}
	}
	for i, rd := range r.Rounds {
		if rd.API.FirstError != "" || rd.Bare.FirstError != "" {
			fmt.Printf("round %d first errors: api %q, bare %q (bare errors %d)\n", i+1, rd.API.FirstError, rd.Bare.FirstError, rd.Bare.Errors)
		}
	}
	fmt.Printf("cpu during the API runs (mean of rounds): %s\n", baseline.MeanUsage(apiCPU(r.Rounds)))
	pb, ig := r.Publish, r.Ingest
	fmt.Printf("publisher: %d updates in %.1f s (%.0f/s, target %.0f/s); ingest: %.0f applied, %.0f ignored, %.0f failures, its freshness metric p50 %.1f / p99 %.1f ms, %d messages not yet acknowledged at the end\n",
		pb.Sent, pb.Seconds, pb.Rate, pb.Target, ig.Applied, ig.Ignored, ig.Failures, ig.Freshness.P50MS, ig.Freshness.P99MS, r.Backlog)
	fmt.Printf("load: %d events, %d markets in %.1f s (%s)\n", r.Load.Events, r.Load.Markets, r.Load.Seconds, r.Load.Path)
	for _, n := range slices.Sorted(maps.Keys(r.Mem)) {
		fmt.Printf("%s memory: VmRSS %.0f MB at the end, %.0f MB highest sampled in the runs, VmHWM %.0f MB\n",
			n, r.Mem[n].RSSMB, s.MaxRSSMB[n], r.Mem[n].HWMMB)
	}
	for _, g := range r.Shown {
		fmt.Printf("regression: round %d poller %d market %s: %s showed version %d at %.1f ms; %s had shown %d at %.1f ms\n",
			g.Round, g.Poller, g.Market, g.Node, g.Shown, g.AtMS, g.SeenFrom, g.Seen, g.SeenAtMS)
	}
	for _, name := range slices.Sorted(maps.Keys(r.ChildWarnings)) {
		w := r.ChildWarnings[name]
		for _, msg := range slices.Sorted(maps.Keys(w)) {
			fmt.Printf("%s log: %d × %s\n", name, w[msg], msg)
		}
	}
	for _, g := range r.Goals {
		fmt.Printf("goal: %-40s %9.2f  %s\n", g.Goal, g.Value, measure.Met(g.Met))
		if g.Goal == fmt.Sprintf("poll p99 ≤ %.0f ms", goalPollP99MS) {
			fmt.Printf("      (floor: the bare server's own p99 under the same load is %.2f ms)\n", s.BareP99MS)
		}
		if g.Goal == fmt.Sprintf("ingest freshness p99 ≤ %.0f ms", goalIngestFreshP99MS) {
			fmt.Printf("      (floor: with the bare server in the API's place, ingest's p99 was %.1f ms; with no pollers at all %.1f ms)\n",
				s.IngestBareP99MS, r.Quiet.P99MS)
		}
	}
	verdict = "all goals met"
	if !r.AllMet {
		verdict = "GOALS NOT MET (see above)"
	}
	fmt.Printf("poll: %s in %.0f s; latency and staleness figures are the median of the rounds'; logs %s\n\n",
		verdict, r.Seconds, strings.Join(slices.Sorted(maps.Values(r.ChildLogs)), ", "))
}

// staleFmt shows a staleness percentile, or that it is past the grace.
func staleFmt(v float64, beyond bool) string {
	if beyond {
		return fmt.Sprintf("> %.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// apiCPU is the CPU use of each round's API run.
func apiCPU(rs []PollRound) []measure.CPUUsage {
	out := make([]measure.CPUUsage, len(rs))
	for i, r := range rs {
		out[i] = r.CPUAPI
	}
	return out
}

// pgRoundCell is a round's Postgres CPU of its own backends.
func pgRoundCell(rd PollRound) string {
	if rd.PG == nil {
		return "n/a"
	}
	c := rd.PG.Cores
	closed := ""
	if rd.CandleClose {
		closed = " (a 5m close)"
	}
	return fmt.Sprintf("%.1f µs%s, %.2f/%.2f/%.2f/%.2f", rd.PGPerAppliedUS, closed, c[pollNames[0]], c[pollNames[1]], c["ingest"], c["other"])
}

// limitsAloneGoal judges the limit decisions made without Redis: none,
// Redis being up throughout (a slow Redis is not a down one). A binary that
// does not count them is not judged met.
func limitsAloneGoal(s PollSummary) measure.GoalCheck {
	g := measure.GoalCheck{Goal: "limit decisions made without Redis = 0 (Redis up: slow is not down)", Value: s.LimitsAlone, Met: s.LimitsAlone == 0}
	if s.LimitsAloneUnknown {
		g.Goal += " — not reported by this binary"
		g.Value, g.Met = -1, false
	}
	return g
}

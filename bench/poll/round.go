package poll

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// roundEnv is what a round runs against.
type roundEnv struct {
	sb       *world.Sandbox
	ing      *world.Child
	pub      *world.Publisher
	sched    *world.UpdateSchedule
	api      []pollNode
	bare     pollNode
	nodes    []*world.APINode
	children map[int]string
	// pg attributes Postgres CPU to the children's backends (nil: not).
	pg *world.PGMonitor
	// profiles: CPU profiles to take over the API run's measured part, by
	// child name → file (-profile, last round); admins: their admin servers.
	profiles, admins map[string]string
}

// round is one bare run, then one API run with staleness and regressions
// accounted, CPU per process and the nodes' RSS sampled, and what the
// publisher and ingest did meanwhile.
func (e *roundEnv) round(ctx context.Context, pollers []*world.Poller, p PollParams) (PollRound, error) {
	var round PollRound
	cpu := measure.SampleCPUNamed(e.children)
	bareBefore, err := e.ing.Metrics(ctx)
	if err != nil {
		return round, err
	}
	b, err := pollRun(ctx, pollers, pollSpec{Nodes: []pollNode{e.bare}, Conns: p.Conns, Warmup: p.Warmup, Duration: p.Duration})
	if err != nil {
		return round, fmt.Errorf("bare: %w", err)
	}
	round.CPUBare = measure.SampleCPUNamed(e.children).UsageSince(cpu)
	bareAfter, err := e.ing.Metrics(ctx)
	if err != nil {
		return round, err
	}
	round.IngestFreshnessBare = bareAfter.Sub(bareBefore).SecondsHistogram("marketdata_ingest_freshness_seconds")

	names := make([]string, len(e.api))
	for i, n := range e.api {
		names[i] = n.Name
	}
	acct := newPollAccount(e.sched, names, p.Conns)
	before, err := e.ing.Metrics(ctx)
	if err != nil {
		return round, err
	}
	sent, began := e.pub.Sent.Load(), time.Now()
	rss := sampleRSS(e.nodes, pollRSSEvery)
	// Ingest's Postgres CPU per applied update is over the whole run, as
	// its applied count is.
	pgRun := world.PGStart(ctx, e.pg)
	cpu = measure.SampleCPUNamed(e.children)
	// Reads by layer and Postgres CPU are of the measured part: the
	// warm-up is not the steady state.
	var (
		profiling   sync.WaitGroup
		readsBefore []measure.Scrape
		readsErr    error
		pg          world.PGPhase
	)
	a, err := pollRun(ctx, pollers, pollSpec{Nodes: e.api, Conns: p.Conns, Warmup: p.Warmup, Duration: p.Duration,
		Conditional: true, Acct: acct, Grace: p.Grace, AtMeasure: func() {
			readsBefore, readsErr = e.nodeMetrics(ctx)
			pg = world.PGStart(ctx, e.pg)
			for name, file := range e.profiles {
				profiling.Go(func() {
					u := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", e.admins[name], int(p.Duration.Seconds())-1)
					if err := measure.FetchTo(ctx, u, file); err != nil {
						fmt.Fprintf(os.Stderr, "poll: profile of %s: %v\n", name, err)
						return
					}
					fmt.Printf("profile: go tool pprof -top bin/marketdata %s\n", file)
				})
			}
		}})
	profiling.Wait()
	round.CPUAPI = measure.SampleCPUNamed(e.children).UsageSince(cpu)
	round.PG = pg.End(ctx)
	pgWhole := pgRun.End(ctx)
	round.MaxRSSMB = rss()
	if err != nil {
		return round, fmt.Errorf("api: %w", err)
	}
	readsAfter, err := e.nodeMetrics(ctx)
	if err = cmp.Or(readsErr, err); err != nil {
		return round, err
	}
	if len(readsBefore) != len(readsAfter) {
		return round, fmt.Errorf("api: /metrics not scraped at the measured part's start")
	}
	round.Reads, round.StoreReads = measure.Reads{}, map[string]float64{}
	for i, n := range e.api {
		r := readsAfter[i].Sub(readsBefore[i]).ReadsOf()
		round.Reads.Add(r)
		round.StoreReads[n.Name] = r.Layer(measure.StoreLayer)
		round.StoreReadsTotal += round.StoreReads[n.Name]
		if _, ok := readsAfter[i][limitsAloneMetric]; !ok {
			round.LimitsAloneUnknown = true // a binary from before the metric
		}
		round.LimitsAlone += readsAfter[i][limitsAloneMetric] - readsBefore[i][limitsAloneMetric]
	}
	el := time.Since(began).Seconds()
	round.PublishRate = measure.Round2(float64(e.pub.Sent.Load()-sent) / el)
	after, err := e.ing.Metrics(ctx)
	if err != nil {
		return round, err
	}
	d := after.Sub(before)
	applied := d[`marketdata_ingest_messages_total{kind="price",outcome="applied"}`]
	round.IngestApplied = measure.Round2(applied / el)
	if pgWhole != nil && applied > 0 {
		round.PGPerAppliedUS = measure.Round2(1e6 * pgWhole.Seconds["ingest"] / applied)
	}
	round.IngestFreshness = d.SecondsHistogram("marketdata_ingest_freshness_seconds")
	// The fold's 5m mark moved: a close (in this world every bucket has
	// data) fell inside the API run, and its Postgres CPU is in the round's.
	round.CandleClose = after[world.CandleMark] > before[world.CandleMark]
	if round.IngestBacklog, err = world.IngestBacklog(ctx, e.sb); err != nil {
		return round, err
	}
	var unseen int64
	for _, pl := range pollers {
		unseen += acct.unseen(pl)
	}
	round.Bare, round.API = b, a
	round.Ratio = measure.Round2(a.RPS / b.RPS)
	round.Staleness, round.Regressions, round.FirstRegressions = acct.result(unseen, p.Grace)
	round.Answer, round.Cadence = acct.answerResult()
	return round, nil
}

// limitsAloneMetric counts an API node's limit decisions made without Redis.
const limitsAloneMetric = "marketdata_ratelimit_decided_alone_total"

// nodeMetrics scrapes every API node's /metrics, in e.api's order.
func (e *roundEnv) nodeMetrics(ctx context.Context) ([]measure.Scrape, error) {
	out := make([]measure.Scrape, len(e.nodes))
	for i, n := range e.nodes {
		s, err := n.Metrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pollNames[i], err)
		}
		out[i] = s
	}
	return out, nil
}

// sampleRSS samples the nodes' VmRSS every d until the returned function is
// called, which returns the highest of each, in MB.
func sampleRSS(nodes []*world.APINode, d time.Duration) func() map[string]float64 {
	peak := make(map[string]float64, len(nodes))
	stop := make(chan struct{})
	done := make(chan struct{})
	take := func() {
		for i, n := range nodes {
			if m, err := measure.ReadProcMem(n.Pid()); err == nil {
				peak[pollNames[i]] = max(peak[pollNames[i]], m.RSSMB)
			}
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			take()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() map[string]float64 {
		close(stop)
		<-done
		take()
		return peak
	}
}

package poll

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// fakeNode answers snapshots from the schedule: market m shows its newest
// version published at least delay ago, in the price item layout of
// cache/render.go, with an ETag of the versions and 304 on a match. A node
// with a longer delay than another is a node behind.
type fakeNode struct {
	sched *world.UpdateSchedule
	delay time.Duration
	index map[string]int32
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		http.Error(w, "no key", http.StatusUnauthorized)
		return
	}
	cut := f.sched.Since(time.Now()) - int64(f.delay)
	var b strings.Builder
	h := fnv.New64a()
	b.WriteString(`{"data":[`)
	for i, id := range strings.Split(r.URL.Query().Get("ids"), ",") {
		m, ok := f.index[id]
		if !ok {
			http.Error(w, "unknown id "+id, http.StatusUnprocessableEntity)
			return
		}
		v := int64(1)
		for u := int64(2); ; u++ {
			pub, ok := f.sched.PubTime(m, u)
			if !ok || pub > cut {
				break
			}
			v = u
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"market_id":%q,"event_id":"ev_1","status":"active","quotes":{"venue_a":{"bid":0.41,"ask":0.43,"last":0.42,"volume_24h":%d}},"best_bid":0.41,"best_ask":0.43,"version":%d,"updated_at":"2026-01-02T03:04:05.123456Z"}`,
			id, 100+v, v)
		h.Write([]byte(id + "=" + strconv.FormatInt(v, 10) + ";"))
	}
	b.WriteString(`],"missing":[]}`)
	etag := fmt.Sprintf(`"%x"`, h.Sum64())
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(b.String())) // a failed write shows as the client's error
}

// fakeRun is one accounted run of the pollers against two fake nodes with
// the given delays while updates are "published" (their times recorded) at
// rate: what the poll benchmark does, with fakes for NATS, ingest and the API.
type fakeRun struct {
	run         PollRun
	stale       StalenessStats
	regressions int64
	kept        []Regression
	answer      AnswerStalenessStats
	cadence     CadenceStats
}

func runFake(t *testing.T, delayA, delayB time.Duration, rate float64) fakeRun {
	t.Helper()
	const (
		markets = 400
		pollers = 24
		ids     = 20
		conns   = 4
	)
	warmup, measured, grace := 300*time.Millisecond, 1500*time.Millisecond, 300*time.Millisecond
	pop, err := world.NewPopularity(markets, 1.1, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sched := world.NewSchedule(start, markets, int(rate*3*(warmup+measured).Seconds()), pop.Drawer(world.NewRand(3)))
	index := make(map[string]int32, markets)
	name := func(m int32) string { return fmt.Sprintf("mk_%04d", m) }
	for m := range int32(markets) {
		index[name(m)] = m
	}
	var nodes []pollNode
	for i, d := range []time.Duration{delayA, delayB} {
		srv := httptest.NewServer(&fakeNode{sched: sched, delay: d, index: index})
		t.Cleanup(srv.Close)
		nodes = append(nodes, pollNode{Name: []string{"a", "b"}[i], Addr: srv.Listener.Addr().String()})
	}
	ps := world.NewPollers(pop.Watchlists(pollers, ids, 2), name, []string{"k1", "k2"})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	published := make(chan struct{})
	go func() {
		defer close(published)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for n := 0; n < len(sched.Market); {
			for due := min(int(time.Since(start).Seconds()*rate)+1, len(sched.Market)); n < due; n++ {
				sched.Published(n, time.Now())
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	acct := newPollAccount(sched, []string{"a", "b"}, conns)
	run, err := pollRun(ctx, ps, pollSpec{Nodes: nodes, Conns: conns, Warmup: warmup, Duration: measured,
		Conditional: true, Acct: acct, Grace: grace})
	cancel()
	<-published
	if err != nil {
		t.Fatal(err)
	}
	var unseen int64
	for _, p := range ps {
		unseen += acct.unseen(p)
	}
	var r fakeRun
	r.run = run
	r.stale, r.regressions, r.kept = acct.result(unseen, grace)
	r.answer, r.cadence = acct.answerResult()
	t.Logf("polls %d (304: %.0f%%, errors %d, per node %v), staleness %+v, regressions %d, answer staleness %+v, cadence %+v",
		run.Polls, 100*run.Frac304, run.Errors, run.PerNode, r.stale, r.regressions, r.answer, r.cadence)
	return r
}

// Two nodes equally behind: the staleness a poller sees is the delay plus
// at most a poll cycle, never less, and no answer goes back in time.
func TestPollStalenessOfKnownDelay(t *testing.T) {
	const delay = 60 * time.Millisecond
	r := runFake(t, delay, delay, 400)
	if r.run.Errors != 0 || r.run.OK == 0 || r.run.NotModified == 0 {
		t.Fatalf("polls: %d errors (first %q), %d 200s, %d 304s; want no error and both answers", r.run.Errors, r.run.FirstError, r.run.OK, r.run.NotModified)
	}
	if r.run.PerNode["a"] == 0 || r.run.PerNode["b"] == 0 {
		t.Fatalf("polls per node %v: want both nodes polled", r.run.PerNode)
	}
	if r.regressions != 0 {
		t.Fatalf("regressions = %d (%+v), want 0 from nodes that agree", r.regressions, r.kept)
	}
	st := r.stale
	if st.Seen < 100 || st.Unknown != 0 {
		t.Fatalf("staleness pairs seen %d, unknown versions %d: want ≥ 100 and 0", st.Seen, st.Unknown)
	}
	d := measure.MS(delay)
	// A poll cycle here is a few ms; a loaded shared machine adds some.
	if st.SeenP50MS < d || st.SeenP50MS > d+25 {
		t.Errorf("staleness p50 = %.2f ms, want within [%.0f, %.0f]", st.SeenP50MS, d, d+25)
	}
	if st.P99MS < d || st.P99MS > d+200 || st.Beyond {
		t.Errorf("staleness p99 = %.2f ms (beyond %v), want within [%.0f, %.0f]", st.P99MS, st.Beyond, d, d+200)
	}
	if float64(st.Late+st.Unseen) > 0.01*float64(st.Pairs) {
		t.Errorf("%d of %d pairs not seen in the run, want under 1 %%", st.Late+st.Unseen, st.Pairs)
	}
}

// Node b is 250 ms behind node a: a poller alternating between them sees
// versions go back, and each regression names the node, market, versions.
func TestPollDetectsRegressionFromLaggingNode(t *testing.T) {
	r := runFake(t, 0, 250*time.Millisecond, 400)
	if r.run.Errors != 0 {
		t.Fatalf("polls: %d errors (first %q), want 0", r.run.Errors, r.run.FirstError)
	}
	if r.regressions == 0 || len(r.kept) == 0 {
		t.Fatalf("regressions = %d, want some from the lagging node", r.regressions)
	}
	for _, g := range r.kept {
		if g.Node != "b" || g.SeenFrom != "a" || g.Shown >= g.Seen || g.AtMS < g.SeenAtMS || !strings.HasPrefix(g.Market, "mk_") {
			t.Errorf("regression %+v: want node b showing less than a showed earlier", g)
		}
	}
}

// Nodes an hour behind never show an update: every pair is unseen and the
// percentiles say they are past the grace rather than a number.
func TestPollCountsUnseenPairs(t *testing.T) {
	r := runFake(t, time.Hour, time.Hour, 400)
	st := r.stale
	if st.Seen != 0 || st.Unseen == 0 || st.Pairs != st.Unseen+st.Late || !st.Beyond {
		t.Fatalf("staleness %+v: want every pair unseen and p99 beyond the grace", st)
	}
	if r.run.Frac304 < 0.5 {
		t.Errorf("304 fraction %.2f: a node that never changes should answer mostly 304", r.run.Frac304)
	}
	// Every measured answer, 304s included, has a staleness for each of
	// its 20 markets; a node showing version 1 forever is stale.
	if want := 20 * r.run.Polls; r.answer.Pairs != want || r.answer.Stale == 0 {
		t.Errorf("answer staleness over %d pairs (%d stale); want %d pairs, some stale", r.answer.Pairs, r.answer.Stale, want)
	}
	if r.cadence.Count == 0 {
		t.Error("no poll cadence measured")
	}
}

// A round whose staleness p99 is past the grace (its value is the grace)
// ranks above every measured one in the median, not at the grace.
func TestPollSummaryRanksBeyondGraceLast(t *testing.T) {
	r := &PollResult{Params: PollParams{GraceS: 1}}
	for _, st := range []StalenessStats{
		{P50MS: 495, P99MS: 1130}, {P50MS: 639, P99MS: 1310}, {P50MS: 598, P99MS: 1000, Beyond: true},
		{P50MS: 679, P99MS: 1523}, {P50MS: 745, P99MS: 2031},
	} {
		r.Rounds = append(r.Rounds, PollRound{Staleness: st, Ratio: 1})
	}
	r.summarise()
	if s := r.Summary; s.StaleP99MS != 1523 || s.StaleBeyond || s.StaleP50MS != 639 {
		t.Fatalf("median staleness p50 %v, p99 %v (beyond %v); want 639, 1523, false", s.StaleP50MS, s.StaleP99MS, s.StaleBeyond)
	}
	for i := range 3 {
		r.Rounds[i].Staleness = StalenessStats{P50MS: 1000, P99MS: 1000, Beyond: true, P50Beyond: true}
	}
	r.summarise()
	if s := r.Summary; s.StaleP99MS != 1000 || !s.StaleBeyond || !s.Stale50Out {
		t.Fatalf("three rounds past the grace: p99 %v beyond %v, p50 beyond %v; want 1000, true, true",
			s.StaleP99MS, s.StaleBeyond, s.Stale50Out)
	}
}

// The staleness goal is on answer staleness (median of the rounds' p99),
// and the correctness counts are kept per round.
func TestPollSummaryAnswerStaleness(t *testing.T) {
	r := &PollResult{Params: PollParams{GraceS: 1}}
	for i, p99 := range []float64{40, 250, 90, 60, 30} {
		rd := PollRound{Ratio: 1, Answer: AnswerStalenessStats{P50MS: 0, P99MS: p99, MaxMS: 2 * p99}}
		rd.Regressions = int64(i % 2)
		r.Rounds = append(r.Rounds, rd)
	}
	r.summarise()
	s := r.Summary
	if s.AnswerP99MS != 60 || s.AnswerMaxMS != 500 {
		t.Errorf("answer staleness p99 %v max %v, want 60 and 500", s.AnswerP99MS, s.AnswerMaxMS)
	}
	if g := r.Goals[2]; !strings.Contains(g.Goal, "answer staleness") || !g.Met || g.Value != 60 {
		t.Errorf("goal %+v, want answer staleness met at 60", g)
	}
	if got := s.RoundRegressions; len(got) != 5 || got[1] != 1 || got[2] != 0 || s.Regressions != 2 {
		t.Errorf("regressions per round %v (sum %d), want [0 1 0 1 0] and 2", got, s.Regressions)
	}
	if r.Failure() == nil {
		t.Error("regressions in two rounds did not fail the run")
	}
}

// TestPollRoundCellNamesACandleClose: a round whose API run held a 5m
// candle close says so beside its Postgres CPU, which the close inflates.
func TestPollRoundCellNamesACandleClose(t *testing.T) {
	rd := PollRound{PG: &world.PGCPU{Cores: map[string]float64{"ingest": 0.6}}, PGPerAppliedUS: 169.4}
	if got := pgRoundCell(rd); strings.Contains(got, "close") {
		t.Errorf("a round without a close: %q names one", got)
	}
	rd.CandleClose = true
	if got, want := pgRoundCell(rd), "169.4 µs (a 5m close), "; !strings.HasPrefix(got, want) {
		t.Errorf("a round with a close: %q, want it to start with %q", got, want)
	}
}

// TestPollSummaryLimitsAlone: limit decisions the nodes made without Redis
// are summed over the rounds, kept per round, and fail their goal.
func TestPollSummaryLimitsAlone(t *testing.T) {
	r := &PollResult{Params: PollParams{GraceS: 1}}
	for _, n := range []float64{0, 3, 0} {
		r.Rounds = append(r.Rounds, PollRound{Ratio: 1, LimitsAlone: n})
	}
	r.summarise()
	if s := r.Summary; s.LimitsAlone != 3 || len(s.RoundLimitsAlone) != 3 || s.RoundLimitsAlone[1] != 3 {
		t.Errorf("limits decided alone %v per round %v, want 3 and [0 3 0]", s.LimitsAlone, s.RoundLimitsAlone)
	}
	var found bool
	for _, g := range r.Goals {
		if strings.Contains(g.Goal, "without Redis") {
			found = true
			if g.Met || g.Value != 3 {
				t.Errorf("goal %+v, want not met at 3", g)
			}
		}
	}
	if !found {
		t.Error("no goal for the limit decisions made without Redis")
	}
	// A binary without the metric is not judged met.
	r.Rounds[0].LimitsAloneUnknown, r.Rounds[1].LimitsAlone = true, 0
	r.summarise()
	for _, g := range r.Goals {
		if strings.Contains(g.Goal, "without Redis") && (g.Met || !strings.Contains(g.Goal, "not reported")) {
			t.Errorf("goal %+v with the metric missing, want not met and said not reported", g)
		}
	}
}

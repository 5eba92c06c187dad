package poll

import (
	"slices"
	"time"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// Regression is an answer that showed a poller an older version of a market
// than one it had already seen. Times are ms since the benchmark's clock
// started.
type Regression struct {
	Round    int     `json:"round,omitempty"`
	Poller   int     `json:"poller"`
	Market   string  `json:"market_id"`
	Node     string  `json:"node"`
	Shown    int64   `json:"version_shown"`
	Seen     int64   `json:"version_seen_before"`
	SeenFrom string  `json:"seen_from_node"`
	SeenAtMS float64 `json:"seen_at_ms"`
	AtMS     float64 `json:"answer_at_ms"`
}

// pollAccount is the staleness and regression accounting of one API run.
// Staleness pairs are the updates published in [From, To] and the pollers
// watching their market; To ends Grace before the run does, so a pair not
// seen by the end waited longer than Grace.
type pollAccount struct {
	sched    *world.UpdateSchedule
	nodes    []string
	from, to int64 // ns since sched.start
	// conns is each connection's share, touched only by it.
	conns []connAccount
}

// connAccount is what one connection counted.
type connAccount struct {
	stale measure.DurHist
	// late are pairs seen only after the run's measured end.
	late        int64
	regressions int64
	kept        []Regression
	// unknown counts versions shown that the schedule never published.
	unknown int64
	// answer is the answer staleness of each (answer, market) pair of the
	// measured part, staleAnswers those above 0; cadence the time between
	// a poller's requests (stale.go).
	answer       measure.DurHist
	staleAnswers int64
	cadence      measure.DurHist
}

func newPollAccount(sched *world.UpdateSchedule, nodes []string, conns int) *pollAccount {
	return &pollAccount{sched: sched, nodes: nodes, conns: make([]connAccount, conns)}
}

// window sets the updates the run's staleness counts: those published from
// from to to.
func (a *pollAccount) window(from, to time.Time) {
	a.from, a.to = a.sched.Since(from), a.sched.Since(to)
}

// observe takes one 200 answer to p from node at time at (ns since the
// schedule's start) showing versions (by watchlist position, 0 = absent);
// measured says whether the run's measured part was still on. Versions only
// go up in p's memory: an older one is a regression and changes nothing.
func (a *pollAccount) observe(c *connAccount, p *world.Poller, node int, at int64, measured bool, versions []int64) {
	for j, v := range versions {
		old := p.Seen[j]
		switch {
		case v == 0 || v == old:
			continue
		case v < old:
			c.regressions++
			if len(c.kept) < measure.MaxRegressionsKept {
				c.kept = append(c.kept, Regression{
					Poller: p.N, Market: p.IDs[j], Node: a.nodes[node], Shown: v, Seen: old,
					SeenFrom: a.nodes[p.SeenNode[j]], SeenAtMS: nsMS(p.SeenAt[j]), AtMS: nsMS(at),
				})
			}
			continue
		}
		m := p.Markets[j]
		if _, ok := a.sched.PubTime(m, v); !ok && v > 1 {
			c.unknown++
		}
		// Versions (old, v] are newly seen; publish times rise with the
		// version, so the walk down stops at the first before the window.
		for u := v; u > old; u-- {
			pub, ok := a.sched.PubTime(m, u)
			if !ok {
				continue
			}
			if pub < a.from {
				break
			}
			if pub > a.to {
				continue
			}
			if measured {
				c.stale.Add((at - pub) / 1000)
			} else {
				c.late++
			}
		}
		p.Seen[j], p.SeenNode[j], p.SeenAt[j] = v, int8(node), at
	}
}

// unseen counts the pairs of the window that p has not seen.
func (a *pollAccount) unseen(p *world.Poller) int64 {
	var n int64
	for j, m := range p.Markets {
		for u := p.Seen[j] + 1; ; u++ {
			pub, ok := a.sched.PubTime(m, u)
			if !ok || pub > a.to {
				break
			}
			if pub >= a.from {
				n++
			}
		}
	}
	return n
}

// StalenessStats is the staleness of one run's pairs: publish → the first
// answer that showed the poller that version or newer.
type StalenessStats struct {
	// Pairs is every (update, watching poller) pair of the window; Seen of
	// them were seen during the run, Late after its end, Unseen never.
	Pairs  int64 `json:"pairs"`
	Seen   int64 `json:"seen"`
	Late   int64 `json:"seen_after_end"`
	Unseen int64 `json:"never_seen"`
	// P50MS and P99MS rank every pair, those not seen by the end (each
	// waited more than the grace) above every seen one: exact while they
	// fall below the grace. Beyond says a figure fell among them (the
	// value is then the grace).
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	P50Beyond bool    `json:"p50_beyond_grace"`
	Beyond    bool    `json:"p99_beyond_grace"`
	// SeenP50MS, SeenP99MS and MaxMS are over the seen pairs alone.
	SeenP50MS float64 `json:"seen_p50_ms"`
	SeenP99MS float64 `json:"seen_p99_ms"`
	MaxMS     float64 `json:"seen_max_ms"`
	// Unknown counts versions shown that were never published.
	Unknown int64 `json:"unknown_versions"`
}

// result merges the connections' accounts; unseen is the sum of unseen
// over the pollers once the run has stopped.
func (a *pollAccount) result(unseen int64, grace time.Duration) (StalenessStats, int64, []Regression) {
	var h measure.DurHist
	var st StalenessStats
	var regs int64
	var kept []Regression
	for i := range a.conns {
		c := &a.conns[i]
		h.Merge(&c.stale)
		st.Late += c.late
		st.Unknown += c.unknown
		regs += c.regressions
		kept = append(kept, c.kept...)
	}
	st.Seen, st.Unseen = h.N, unseen
	st.Pairs = st.Seen + st.Late + st.Unseen
	beyond := st.Late + st.Unseen
	var ok50, ok99 bool
	st.P50MS, ok50 = h.QuantileMS(0.50, beyond)
	st.P99MS, ok99 = h.QuantileMS(0.99, beyond)
	if !ok99 {
		st.Beyond, st.P99MS = true, measure.MS(grace)
	}
	if !ok50 {
		st.P50Beyond, st.P50MS = true, measure.MS(grace)
	}
	st.SeenP50MS, _ = h.QuantileMS(0.50, 0)
	st.SeenP99MS, _ = h.QuantileMS(0.99, 0)
	st.MaxMS = measure.Round2(float64(h.Max) / 1000)
	slices.SortFunc(kept, func(x, y Regression) int { return int(x.AtMS*1000) - int(y.AtMS*1000) })
	return st, regs, kept[:min(len(kept), measure.MaxRegressionsKept)]
}

func nsMS(ns int64) float64 { return measure.Round2(float64(ns) / 1e6) }

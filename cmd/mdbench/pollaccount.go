package main

import (
	"slices"
	"time"
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
	sched    *updateSchedule
	nodes    []string
	from, to int64 // ns since sched.start
	// conns is each connection's share, touched only by it.
	conns []connAccount
}

// connAccount is what one connection counted.
type connAccount struct {
	stale durHist
	// late are pairs seen only after the run's measured end.
	late        int64
	regressions int64
	kept        []Regression
	// unknown counts versions shown that the schedule never published.
	unknown int64
	// answer is the answer staleness of each (answer, market) pair of the
	// measured part, staleAnswers those above 0; cadence the time between
	// a poller's requests (pollstale.go).
	answer       durHist
	staleAnswers int64
	cadence      durHist
}

func newPollAccount(sched *updateSchedule, nodes []string, conns int) *pollAccount {
	return &pollAccount{sched: sched, nodes: nodes, conns: make([]connAccount, conns)}
}

// window sets the updates the run's staleness counts: those published from
// from to to.
func (a *pollAccount) window(from, to time.Time) {
	a.from, a.to = a.sched.since(from), a.sched.since(to)
}

// observe takes one 200 answer to p from node at time at (ns since the
// schedule's start) showing versions (by watchlist position, 0 = absent);
// measured says whether the run's measured part was still on. Versions only
// go up in p's memory: an older one is a regression and changes nothing.
func (a *pollAccount) observe(c *connAccount, p *Poller, node int, at int64, measured bool, versions []int64) {
	for j, v := range versions {
		old := p.seen[j]
		switch {
		case v == 0 || v == old:
			continue
		case v < old:
			c.regressions++
			if len(c.kept) < maxRegressionsKept {
				c.kept = append(c.kept, Regression{
					Poller: p.N, Market: p.IDs[j], Node: a.nodes[node], Shown: v, Seen: old,
					SeenFrom: a.nodes[p.seenNode[j]], SeenAtMS: nsMS(p.seenAt[j]), AtMS: nsMS(at),
				})
			}
			continue
		}
		m := p.Markets[j]
		if _, ok := a.sched.pubTime(m, v); !ok && v > 1 {
			c.unknown++
		}
		// Versions (old, v] are newly seen; publish times rise with the
		// version, so the walk down stops at the first before the window.
		for u := v; u > old; u-- {
			pub, ok := a.sched.pubTime(m, u)
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
				c.stale.add((at - pub) / 1000)
			} else {
				c.late++
			}
		}
		p.seen[j], p.seenNode[j], p.seenAt[j] = v, int8(node), at
	}
}

// unseen counts the pairs of the window that p has not seen.
func (a *pollAccount) unseen(p *Poller) int64 {
	var n int64
	for j, m := range p.Markets {
		for u := p.seen[j] + 1; ; u++ {
			pub, ok := a.sched.pubTime(m, u)
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
	var h durHist
	var st StalenessStats
	var regs int64
	var kept []Regression
	for i := range a.conns {
		c := &a.conns[i]
		h.merge(&c.stale)
		st.Late += c.late
		st.Unknown += c.unknown
		regs += c.regressions
		kept = append(kept, c.kept...)
	}
	st.Seen, st.Unseen = h.n, unseen
	st.Pairs = st.Seen + st.Late + st.Unseen
	beyond := st.Late + st.Unseen
	var ok50, ok99 bool
	st.P50MS, ok50 = h.quantileMS(0.50, beyond)
	st.P99MS, ok99 = h.quantileMS(0.99, beyond)
	if !ok99 {
		st.Beyond, st.P99MS = true, ms(grace)
	}
	if !ok50 {
		st.P50Beyond, st.P50MS = true, ms(grace)
	}
	st.SeenP50MS, _ = h.quantileMS(0.50, 0)
	st.SeenP99MS, _ = h.quantileMS(0.99, 0)
	st.MaxMS = round2(float64(h.max) / 1000)
	slices.SortFunc(kept, func(x, y Regression) int { return int(x.AtMS*1000) - int(y.AtMS*1000) })
	return st, regs, kept[:min(len(kept), maxRegressionsKept)]
}

func nsMS(ns int64) float64 { return round2(float64(ns) / 1e6) }

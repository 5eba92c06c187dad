package poll

import (
	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// answered accounts one answer to p whose request started at start (ns
// since the schedule's start) and that shows versions (by watchlist
// position, 0 = absent): each market's answer staleness. A 304 shows the
// versions of the 200 whose ETag it confirms.
func (a *pollAccount) answered(c *connAccount, p *world.Poller, start int64, versions []int64) {
	for j, v := range versions {
		if v == 0 {
			continue
		}
		st := a.sched.AnswerStaleness(p.Markets[j], v, start)
		c.answer.Add(st / 1000)
		if st > 0 {
			c.staleAnswers++
		}
	}
}

// polled accounts the time since p's previous request of the run: the
// poll cadence, which bounds what answer staleness can be but is not part
// of it.
func (a *pollAccount) polled(c *connAccount, p *world.Poller, start int64, measured bool) {
	if measured && p.LastSent != 0 {
		c.cadence.Add((start - p.LastSent) / 1000)
	}
	p.LastSent = start
}

// AnswerStalenessStats is the answer staleness of one run: per (answer,
// market) pair, the request's start minus the publish time of the newest
// version published before that start which the answer does not show (0
// when it shows that version or a newer one).
type AnswerStalenessStats struct {
	Pairs int64 `json:"pairs"`
	// Stale are the pairs with a staleness above 0.
	Stale      int64   `json:"stale_pairs"`
	StaleShare float64 `json:"stale_share"`
	P50MS      float64 `json:"p50_ms"`
	P99MS      float64 `json:"p99_ms"`
	MaxMS      float64 `json:"max_ms"`
}

// CadenceStats is the time between consecutive requests of a poller.
type CadenceStats struct {
	Count int64   `json:"count"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// answerResult merges the connections' answer staleness and cadence.
func (a *pollAccount) answerResult() (AnswerStalenessStats, CadenceStats) {
	var h, cad measure.DurHist
	var st AnswerStalenessStats
	for i := range a.conns {
		c := &a.conns[i]
		h.Merge(&c.answer)
		cad.Merge(&c.cadence)
		st.Stale += c.staleAnswers
	}
	st.Pairs = h.N
	if st.Pairs > 0 {
		st.StaleShare = round4(float64(st.Stale) / float64(st.Pairs))
	}
	st.P50MS, _ = h.QuantileMS(0.50, 0)
	st.P99MS, _ = h.QuantileMS(0.99, 0)
	st.MaxMS = measure.Round2(float64(h.Max) / 1000)
	cs := CadenceStats{Count: cad.N, MaxMS: measure.Round2(float64(cad.Max) / 1000)}
	cs.P50MS, _ = cad.QuantileMS(0.50, 0)
	cs.P99MS, _ = cad.QuantileMS(0.99, 0)
	return st, cs
}

package feed

import (
	"fmt"
	"math"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// venueTicks is each venue's price grid: ticks per 1.0 (cents on venue_a and
// venue_c, tenths of a cent on venue_b and venue_d).
var venueTicks = [4]int{100, 1000, 100, 1000}

// The fair-value model (docs/matchers.md, "The synthetic feed").
const (
	// maxLogit bounds a binary market's logit: its fair value stays within
	// about 1%–99%.
	maxLogit = 4.5
	// maxOutcomeLogit bounds an exclusive outcome's logit; the softmax over
	// the event's outcomes makes the probabilities.
	maxOutcomeLogit = 6
	// ladderReversion pulls a ladder's latent mean back towards where it
	// started, a share of the gap per step, so that a long run does not
	// drift every threshold to 0 or 1.
	ladderReversion = 0.01
	// venueBias and quoteNoise are the standard deviations of a venue's
	// persistent disagreement with the fair value and of each requote's
	// jitter: small enough that one venue's bid is rarely above another's
	// ask, and then by a cent or so.
	venueBias  = 0.003
	quoteNoise = 0.002
	// staleLimit is how far a market's fair value may move, through its
	// siblings' steps, before its quotes are refreshed.
	staleLimit = 0.015
)

// quote is one venue's top of book for a market, in ticks of 1/unit.
type quote struct {
	unit           int
	bias           float64 // the venue's persistent disagreement with the fair value
	bid, ask, last int     // bid and ask are -1 once the market is settled
	vol            float64 // volume_24h, in contracts
	// complement: the venue lists the market's NO as its YES, and quotes
	// it in its own terms, around 1 − the fair value (matches.go).
	complement bool
}

func (q *quote) price(ticks int) float64 { return float64(ticks) / float64(q.unit) }

// side is a bid or an ask as sent: nil when the book is closed (negative).
func (q *quote) side(ticks int) *float64 {
	if ticks < 0 {
		return nil
	}
	p := q.price(ticks)
	return &p
}

// reprice recomputes the fair probability of e's active markets from e's
// model: a softmax over the outcomes' logits (exclusive), the latent normal's
// tail beyond each threshold (ladder), or each market's own logit (binary).
func (e *event) reprice() {
	switch e.kind {
	case exclusive:
		top := math.Inf(-1)
		for _, m := range e.markets {
			if m.status == store.StatusActive {
				top = math.Max(top, m.logit)
			}
		}
		sum := 0.0
		for _, m := range e.markets {
			if m.status == store.StatusActive {
				m.p = math.Exp(m.logit - top)
				sum += m.p
			}
		}
		for _, m := range e.markets {
			if m.status == store.StatusActive {
				m.p /= sum
			}
		}
	case ladder:
		for _, m := range e.markets {
			below := normCDF((m.threshold - e.mu) / e.sd) // P(X ≤ threshold)
			if e.upward {
				m.p = below
			} else {
				m.p = 1 - below
			}
		}
	default:
		for _, m := range e.markets {
			m.p = sigmoid(m.logit)
		}
	}
}

// priceChange moves m's fair value and publishes its new quotes. When the
// move shifts a sibling's fair value (an exclusive event's other outcomes,
// the other thresholds of a ladder) more than staleLimit away from where the
// sibling was last quoted, the sibling is requoted and published too, so
// that what consumers see stays coherent across the event.
func (g *Generator) priceChange(m *market, now time.Time) {
	g.step(m)
	m.priceVersion++
	m.priceTS = now
	g.emit(g.priceMsg(m))
	if m.ev.kind == binary {
		return
	}
	for _, s := range m.ev.markets {
		if s != m && s.status == store.StatusActive && math.Abs(s.p-s.quotedP) > staleLimit {
			g.requoteAll(s, now)
			g.emit(g.priceMsg(s))
		}
	}
}

// step moves the fair values one step of their random walk and requotes
// every venue m is listed on. A ladder's latent mean moves (all its
// thresholds follow); an outcome's or a binary market's logit moves (an
// exclusive event's other outcomes make room). Walks are in logit or latent
// space, so that prices never leave (0,1) and move less near the edges.
// Only m is requoted: its siblings' quotes catch up at their own steps.
func (g *Generator) step(m *market) {
	e := m.ev
	switch e.kind {
	case ladder:
		e.mu += ladderReversion*(e.anchor-e.mu) + e.vol*e.sd*g.rng.NormFloat64()
		e.reprice()
	case exclusive:
		m.logit = clamp(m.logit+m.volatility*g.rng.NormFloat64(), -maxOutcomeLogit, maxOutcomeLogit)
		e.reprice()
	default:
		m.logit = clamp(m.logit+m.volatility*g.rng.NormFloat64(), -maxLogit, maxLogit)
		m.p = sigmoid(m.logit)
	}
	for _, q := range m.quotes {
		if q != nil {
			g.requote(m, q)
			q.vol *= 0.999 // yesterday's volume rolls out of the 24 hours
		}
	}
	m.quotedP = m.p
}

// requote sets bid and ask around the venue's view of the fair value, keeping
// 0 < bid < ask < 1 and bid ≤ last ≤ ask.
//
// The spread is one to four cents (plus up to half a cent on the venues
// quoting tenths of a cent): wider near 0.5, where a contract's outcome is
// most uncertain, and on a venue where the market trades little. Near 0 and
// 1 the book stops at half a cent (a cent on cent venues) from the edge, so
// that the venues' grids do not cross there.
func (g *Generator) requote(m *market, q *quote) {
	p := m.p
	if q.complement {
		p = 1 - p
	}
	cent := q.unit / 100
	thin := clamp((8.5-math.Log(math.Max(q.vol, 1)))/2, 0, 1.5)
	width := int(0.6 + 6.4*p*(1-p) + thin + 0.8*g.rng.Float64())
	spread := cent * max(1, min(width, 4))
	if cent > 1 {
		spread += g.rng.IntN(cent/2 + 1)
	}
	center := p + q.bias + quoteNoise*g.rng.NormFloat64()
	edge := max(1, cent/2)
	bid := int(math.Round(center*float64(q.unit) - float64(spread)/2))
	bid = max(edge, min(bid, q.unit-edge-spread))
	q.bid, q.ask = bid, bid+spread
	if q.last < q.bid || q.last > q.ask {
		q.last = q.bid + g.rng.IntN(spread+1)
	}
}

// tradeOn executes a random taker order on one venue of m: a buy lifts the
// ask, a sell hits the bid. It updates the quote's last price and volume and
// the event's volume.
func (g *Generator) tradeOn(m *market, now time.Time) ingest.TradeMsg {
	var listed []int
	for v, q := range m.quotes {
		if q != nil {
			listed = append(listed, v)
		}
	}
	v := pick(g.rng, listed)
	q := m.quotes[v]
	side, ticks := "buy", q.ask
	if g.rng.IntN(2) == 0 {
		side, ticks = "sell", q.bid
	}
	var size float64
	if q.unit == 100 { // whole contracts
		size = math.Max(1, math.Round(math.Exp(2.5+1.3*g.rng.NormFloat64())))
	} else { // fractional shares
		size = math.Max(0.01, cents(math.Exp(3+1.5*g.rng.NormFloat64())))
	}
	q.last = ticks
	q.vol += size
	m.ev.volume = cents(m.ev.volume + q.price(ticks)*size)
	g.tradeSeq++
	return ingest.TradeMsg{
		MarketID: ref(m.id),
		TradeID:  ref(fmt.Sprintf("tr_%s_%09d", g.runTag, g.tradeSeq)),
		Venue:    ref(venueName(v)),
		Price:    ref(q.price(ticks)),
		Size:     ref(size),
		Side:     ref(side),
		TS:       ref(stamp(now)),
	}
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// normCDF is the standard normal's cumulative distribution function.
func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

func clamp[T int | float64](v, lo, hi T) T { return max(lo, min(v, hi)) }

package feed

import (
	"fmt"
	"math"
	"time"
)

// venueTicks is each venue's price grid: ticks per 1.0 (cents on venue_a and
// venue_c, tenths of a cent on venue_b and venue_d).
var venueTicks = [4]int{100, 1000, 100, 1000}

// quote is one venue's top of book for a market, in ticks of 1/unit.
type quote struct {
	unit           int
	bias           float64 // the venue's persistent disagreement with the fair value
	bid, ask, last int
	vol            float64 // volume_24h, in contracts
}

func (q *quote) price(ticks int) float64 { return float64(ticks) / float64(q.unit) }

// step moves a market's fair value one step of its random walk and requotes
// every venue it is listed on. The walk is in logit space so that prices
// never leave (0,1) and move less near the edges.
func (g *Generator) step(m *market) {
	m.fair += m.volatility * g.rng.NormFloat64()
	m.fair = math.Max(-4.5, math.Min(4.5, m.fair))
	for _, q := range m.quotes {
		if q != nil {
			g.requote(m, q)
			q.vol *= 0.999 // yesterday's volume rolls out of the 24 hours
		}
	}
}

// requote sets bid and ask around the venue's view of the fair value, keeping
// 0 < bid < ask < 1 and bid ≤ last ≤ ask.
func (g *Generator) requote(m *market, q *quote) {
	p := sigmoid(m.fair) + q.bias + 0.004*g.rng.NormFloat64()
	cent := q.unit / 100
	spread := cent*(1+g.rng.IntN(3)) + g.rng.IntN(cent/2+1)
	bid := int(math.Floor(p*float64(q.unit) - float64(spread)/2))
	bid = max(1, min(bid, q.unit-1-spread))
	q.bid, q.ask = bid, bid+spread
	if q.last < q.bid || q.last > q.ask {
		q.last = q.bid + g.rng.IntN(spread+1)
	}
}

// tradeOn executes a random taker order on one venue of m: a buy lifts the
// ask, a sell hits the bid. It updates the quote's last price and volume and
// the event's volume.
func (g *Generator) tradeOn(m *market, now time.Time) tradeWire {
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
	return tradeWire{
		MarketID: m.id,
		TradeID:  fmt.Sprintf("tr_%s_%09d", g.tradeTag, g.tradeSeq),
		Venue:    venueName(v),
		Price:    q.price(ticks),
		Size:     size,
		Side:     side,
		TS:       stamp(now),
	}
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

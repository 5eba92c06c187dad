// Package candletest is a reference model of the candles (contract §3
// "Candle"), written from the contract alone, for tests to hold
// store.Candles to: it keeps every point and trade that counts and computes
// each bucket from them, with nothing of the store's incremental state.
package candletest

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/marketdata/marketdata/store"
)

// Model holds what a store applied, message by message.
type Model struct {
	// Relations gives a market's relation per venue (store.Venues order;
	// "" is no metadata). Set it before the market's messages are added.
	Relations map[string][4]string

	stored map[string]int64 // market → highest version applied
	seen   map[string]bool  // trade ids applied
	points map[string][]point
	trades map[string][]trade
}

type point struct {
	ts       time.Time
	version  int64
	series   string
	bid, ask *float64
}

type trade struct {
	ts     time.Time
	id     string
	series string
	price  float64
	size   float64
}

// New returns an empty model.
func New() *Model {
	return &Model{Relations: map[string][4]string{}, stored: map[string]int64{},
		seen: map[string]bool{}, points: map[string][]point{}, trades: map[string][]trade{}}
}

// ApplyBatch adds a batch as the store applies it: every price whose version
// is above the highest applied before the batch counts (each (market,
// version) once), every trade id not applied before counts once.
func (m *Model) ApplyBatch(prices []store.Price, trades []store.Trade) {
	before := map[string]int64{}
	for _, p := range prices {
		if _, ok := before[p.MarketID]; !ok {
			before[p.MarketID] = m.stored[p.MarketID]
		}
	}
	counted := map[[2]any]bool{}
	for _, p := range prices {
		k := [2]any{p.MarketID, p.Version}
		if p.Version <= before[p.MarketID] || counted[k] {
			continue
		}
		counted[k] = true
		m.stored[p.MarketID] = max(m.stored[p.MarketID], p.Version)
		m.addPoint(p)
	}
	for _, t := range trades {
		if m.seen[t.TradeID] {
			continue
		}
		m.seen[t.TradeID] = true
		m.addTrade(t)
	}
}

// inverted and counts read a market's relation to venue i.
func (m *Model) relation(market string, i int) string { return m.Relations[market][i] }

func (m *Model) counts(market string, i int) bool {
	r := m.relation(market, i)
	return r == "" || r == store.RelationIdentity || r == store.RelationComplement
}

func (m *Model) addPoint(p store.Price) {
	ts := p.TS.UTC().Truncate(time.Microsecond)
	var best [2]*float64
	for i, v := range store.Venues {
		q, ok := p.Quotes[v]
		if !ok {
			continue
		}
		bid, ask := q.Bid, q.Ask
		if m.relation(p.MarketID, i) == store.RelationComplement {
			bid, ask = oneMinus(q.Ask), oneMinus(q.Bid)
		}
		m.points[p.MarketID] = append(m.points[p.MarketID], point{ts, p.Version, v, bid, ask})
		if m.counts(p.MarketID, i) {
			if bid != nil && (best[0] == nil || *bid > *best[0]) {
				best[0] = bid
			}
			if ask != nil && (best[1] == nil || *ask < *best[1]) {
				best[1] = ask
			}
		}
	}
	m.points[p.MarketID] = append(m.points[p.MarketID], point{ts, p.Version, "all", best[0], best[1]})
}

func (m *Model) addTrade(t store.Trade) {
	i := store.VenueIndex(t.Venue)
	price := t.Price
	if m.relation(t.MarketID, i) == store.RelationComplement {
		price = 1 - price
	}
	ts := t.TS.UTC().Truncate(time.Microsecond)
	m.trades[t.MarketID] = append(m.trades[t.MarketID], trade{ts, t.TradeID, t.Venue, price, t.Size})
	if m.counts(t.MarketID, i) {
		m.trades[t.MarketID] = append(m.trades[t.MarketID], trade{ts, t.TradeID, "all", price, t.Size})
	}
}

func oneMinus(v *float64) *float64 {
	if v == nil {
		return nil
	}
	r := 1 - *v
	return &r
}

// Candles computes what store.Candles must answer.
func (m *Model) Candles(market string, step time.Duration, series string, from, to time.Time) []store.Candle {
	var pts []point
	for _, p := range m.points[market] {
		if p.series == series {
			pts = append(pts, p)
		}
	}
	slices.SortFunc(pts, func(a, b point) int { return cmp.Or(a.ts.Compare(b.ts), cmp.Compare(a.version, b.version)) })
	var trs []trade
	for _, t := range m.trades[market] {
		if t.series == series {
			trs = append(trs, t)
		}
	}
	slices.SortFunc(trs, func(a, b trade) int { return cmp.Or(a.ts.Compare(b.ts), cmp.Compare(a.id, b.id)) })

	start := from.UTC().Truncate(step)
	// The first bucket: start when any data came before it, else the first
	// that holds any.
	first := time.Time{}
	for _, ts := range append(tsOfPoints(pts), tsOfTrades(trs)...) {
		b := ts.Truncate(step)
		if b.Before(start) {
			b = start
		}
		if first.IsZero() || b.Before(first) {
			first = b
		}
	}
	out := []store.Candle{}
	if first.IsZero() {
		return out
	}
	for b := first; b.Before(to); b = b.Add(step) {
		end := b.Add(step)
		c := store.Candle{Start: b}
		// The value in force at b: the last point before it.
		var open *point
		var in []point
		for i := range pts {
			switch {
			case pts[i].ts.Before(b):
				open = &pts[i]
			case pts[i].ts.Before(end):
				in = append(in, pts[i])
			}
		}
		if open == nil && len(in) > 0 {
			open = &in[0]
		}
		if open != nil {
			closing := open
			if len(in) > 0 {
				closing = &in[len(in)-1]
			}
			bids, asks := []*float64{open.bid}, []*float64{open.ask}
			for _, p := range in {
				bids, asks = append(bids, p.bid), append(asks, p.ask)
			}
			c.Bid = ohlc(open.bid, bids, closing.bid)
			c.Ask = ohlc(open.ask, asks, closing.ask)
		}
		var in2 []trade
		for _, t := range trs {
			if !t.ts.Before(b) && t.ts.Before(end) {
				in2 = append(in2, t)
			}
		}
		if len(in2) > 0 {
			prices := make([]*float64, len(in2))
			for i := range in2 {
				c.Volume += in2[i].size
				prices[i] = &in2[i].price
			}
			c.Trades = int64(len(in2))
			c.Trade = ohlc(&in2[0].price, prices, &in2[len(in2)-1].price)
		}
		out = append(out, c)
	}
	return out
}

func tsOfPoints(ps []point) []time.Time {
	out := make([]time.Time, len(ps))
	for i, p := range ps {
		out[i] = p.ts
	}
	return out
}

func tsOfTrades(ts []trade) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.ts
	}
	return out
}

// ohlc is an open, the extremes of vs (nil skipped), a close, each rounded
// to 1e-9 as the store renders them.
func ohlc(open *float64, vs []*float64, closing *float64) *store.OHLC {
	var hi, lo *float64
	for _, v := range vs {
		if v == nil {
			continue
		}
		if hi == nil || *v > *hi {
			hi = v
		}
		if lo == nil || *v < *lo {
			lo = v
		}
	}
	return &store.OHLC{Open: round(open), High: round(hi), Low: round(lo), Close: round(closing)}
}

func round(v *float64) *float64 {
	if v == nil {
		return nil
	}
	r := math.Round(*v*1e9) / 1e9
	return &r
}

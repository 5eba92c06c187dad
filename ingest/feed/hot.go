package feed

import (
	"slices"
	"time"
)

// The hot set: a handful of markets that change every second or so and trade
// from the first seconds, so that a demo's first stream, snapshot and trades
// calls show a live market. In a world of hundreds of markets sharing a rate
// of tens of messages a second, any one market otherwise changes every 20–60
// s and the first trade on it comes minutes in.
//
// The hot markets are those of the first events (lowest ids) listed on at
// least hotMinVenues venues: the ones the README's examples pick
// (`events?limit=1&min_venues=3`, then that event's first markets). Hot
// events neither resolve nor merge into another, so the README's lines keep
// finding the same live markets for as long as the feed runs.
const (
	hotEvents     = 2 // events whose markets are hot
	hotMinVenues  = 3 // the README picks its event with min_venues=3
	hotPerEvent   = 4 // hot markets of one event: its first active ones
	hotMaxMarkets = 6 // hot markets in all
	// A hot market gets a new price every hotPriceMin..hotPriceMax, and one of
	// them trades every hotTradeMin..hotTradeMax: with six hot markets, about
	// five prices and two trades a second.
	hotPriceMin = 800 * time.Millisecond
	hotPriceMax = 1400 * time.Millisecond
	hotTradeMin = 400 * time.Millisecond
	hotTradeMax = 1000 * time.Millisecond
)

// hotChange makes the most overdue change of the hot set that is due at
// now, and reports whether it made one. It takes at most every other change,
// so that the rest of the world keeps at least half of the rate however low
// the rate is; at the rates the feed runs at (tens of messages a second and
// up) every hot change goes out within a few tens of milliseconds of its due
// time. The hot set thus takes a share of the configured rate rather than
// adding to it.
func (g *Generator) hotChange(now time.Time) bool {
	if g.hotStale {
		g.pickHot(now)
	}
	if g.hotLast || len(g.hot) == 0 {
		g.hotLast = false
		return false
	}
	var due *market
	for _, m := range g.hot {
		if !m.hotDue.After(now) && (due == nil || m.hotDue.Before(due.hotDue)) {
			due = m
		}
	}
	switch {
	case due != nil:
		g.priceChange(due, now)
		due.hotDue = now.Add(g.between(hotPriceMin, hotPriceMax))
	case !g.hotTradeDue.After(now):
		g.emit(g.tradeMsg(g.tradeOn(pick(g.rng, g.hot), now)))
		g.hotTradeDue = now.Add(g.between(hotTradeMin, hotTradeMax))
	default:
		return false
	}
	g.hotLast = true
	return true
}

// pickHot chooses the hot set again: the first hotPerEvent active markets of
// each of the first hotEvents active events on hotMinVenues venues or more,
// in creation (and id) order, at most hotMaxMarkets in all. A world with fewer such events
// fills the set with the first served events (two venues or more). A market
// that becomes hot is due at once; one that stays hot keeps its due time.
func (g *Generator) pickHot(now time.Time) {
	g.hotStale = false
	var chosen []*event
	for _, minVenues := range []int{hotMinVenues, 2} {
		for _, e := range g.events {
			if len(chosen) == hotEvents {
				break
			}
			if e.slot >= 0 && venues(e) >= minVenues && !slices.Contains(chosen, e) {
				chosen = append(chosen, e)
			}
		}
	}
	var next []*market
	for _, e := range chosen {
		n := 0
		for _, m := range e.markets {
			if n < hotPerEvent && len(next) < hotMaxMarkets && m.slot >= 0 {
				next = append(next, m)
				n++
			}
		}
	}
	for _, m := range next {
		if !m.hot {
			m.hotDue = now
		}
	}
	for _, m := range g.hot {
		m.hot, m.ev.hot = false, false
	}
	for _, m := range next {
		m.hot, m.ev.hot = true, true
	}
	g.hot = next
}

// between draws a duration uniformly in [lo, hi).
func (g *Generator) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(g.rng.Int64N(int64(hi-lo)))
}

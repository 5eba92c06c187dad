package feed

import (
	"math"
	"time"

	"github.com/marketdata/marketdata/store"
)

// The shares of worldChange's first two kinds: a market resolution, an
// event update (the rest are the other lifecycle changes).
const (
	shareResolveMarket = 0.40
	shareUpdateEvent   = 0.25
)

// rareChange is one of the changes other than prices and trades: an event
// update or, unless EventLife paces them by the clock (life.go), one of the
// lifecycle changes.
func (g *Generator) rareChange(now time.Time) {
	if g.cfg.EventLife > 0 {
		g.updateEvent(pick(g.rng, g.liveEvents), now)
		return
	}
	g.worldChange(g.rng.Float64(), now)
}

// worldChange makes the change x in [0, 1) picks. Resolutions and merges
// shrink the live world and new events grow it; the choice leans towards
// whichever keeps about cfg.Events events live. A hot event (hot.go) is not
// resolved, in part or whole: it gets an event update instead.
func (g *Generator) worldChange(x float64, now time.Time) {
	live, target := len(g.liveEvents), g.cfg.Events
	switch {
	case x < shareResolveMarket:
		if m := pick(g.rng, g.liveMarkets); !m.ev.hot {
			g.resolveMarket(m, now)
		} else {
			g.updateEvent(m.ev, now)
		}
	case x < shareResolveMarket+shareUpdateEvent:
		g.updateEvent(pick(g.rng, g.liveEvents), now)
	case x < 0.85:
		if live > target+target/10 {
			g.resolveLiveEvent(now)
			return
		}
		g.addEvent(now)
	case x < 0.93:
		if live < 2 || live < target-target/10 {
			g.addEvent(now)
			return
		}
		g.mergeEvent(now)
	default:
		if live < target-target/10 {
			g.addEvent(now)
			return
		}
		g.resolveLiveEvent(now)
	}
}

// resolveLiveEvent resolves a random live event, or updates it when it is hot.
func (g *Generator) resolveLiveEvent(now time.Time) {
	if e := pick(g.rng, g.liveEvents); !e.hot {
		g.resolveEvent(e, now)
	} else {
		g.updateEvent(e, now)
	}
}

// addEvent lists a new event: the event, its markets, then their prices.
func (g *Generator) addEvent(now time.Time) {
	e := g.newEvent(now)
	g.emit(g.eventMsg(e))
	for _, m := range e.markets {
		g.emit(g.marketMsg(m))
	}
	for _, m := range e.markets {
		g.emit(g.priceMsg(m))
	}
}

// resolveMarket settles m and what settles with it, and resolves its event
// when no active market is left:
//   - a ladder settles as a whole, every threshold at once, consistently;
//   - an exclusive outcome wins with its fair probability, which settles the
//     event (it "yes", every other outcome "no"); otherwise it is eliminated
//     ("no") and the others' fair values grow to fill its share, so their
//     prices are republished; the last outcome left wins;
//   - a binary market settles alone, "yes" with its fair probability.
func (g *Generator) resolveMarket(m *market, now time.Time) {
	e := m.ev
	switch e.kind {
	case ladder:
		g.resolveEvent(e, now)
		return
	case exclusive:
		if g.rng.Float64() < m.p {
			g.settleExclusive(e, m, now)
			g.closeEvent(e, now)
			return
		}
		g.settle(m, "no", now)
		e.reprice()
		var left []*market
		for _, other := range e.markets {
			if other.status == store.StatusActive {
				left = append(left, other)
			}
		}
		if len(left) == 1 {
			g.settle(left[0], "yes", now)
			g.closeEvent(e, now)
			return
		}
		for _, other := range left {
			g.requoteAll(other, now)
		}
		for _, other := range left {
			g.emit(g.priceMsg(other))
		}
		return
	default:
		g.settle(m, yesWith(g.rng.Float64(), m.p), now)
	}
	for _, other := range e.markets {
		if other.status == store.StatusActive {
			return
		}
	}
	g.closeEvent(e, now)
}

// resolveEvent settles every active market of e, then e itself: an
// exclusive event picks its winner by the fair probabilities; a ladder draws
// the latent quantity once and settles each threshold by it; binary markets
// settle each by its own fair value.
func (g *Generator) resolveEvent(e *event, now time.Time) {
	switch e.kind {
	case exclusive:
		u, winner := g.rng.Float64(), (*market)(nil)
		for _, m := range e.markets {
			if m.status != store.StatusActive {
				continue
			}
			winner = m // the last active one takes what rounding leaves
			if u -= m.p; u < 0 {
				break
			}
		}
		if winner != nil {
			g.settleExclusive(e, winner, now)
		}
	case ladder:
		x := e.mu + e.sd*g.rng.NormFloat64()
		for _, m := range e.markets {
			if m.status != store.StatusActive {
				continue
			}
			if (x <= m.threshold) == e.upward {
				g.settle(m, "yes", now)
			} else {
				g.settle(m, "no", now)
			}
		}
	default:
		for _, m := range e.markets {
			if m.status == store.StatusActive {
				g.settle(m, yesWith(g.rng.Float64(), m.p), now)
			}
		}
	}
	g.closeEvent(e, now)
}

// settleExclusive settles e's active outcomes: winner "yes", the rest "no".
func (g *Generator) settleExclusive(e *event, winner *market, now time.Time) {
	for _, m := range e.markets {
		switch {
		case m == winner:
			g.settle(m, "yes", now)
		case m.status == store.StatusActive:
			g.settle(m, "no", now)
		}
	}
}

func yesWith(u, p float64) string {
	if u < p {
		return "yes"
	}
	return "no"
}

// settle resolves m to result ("yes" or "no"): its market message, then a
// last price message in which every venue's book is closed (no bid, no ask)
// and the last price is the settlement, 1 or 0 (0 or 1 on a complement
// venue, in its own terms). m trades no more and gets no further price.
func (g *Generator) settle(m *market, result string, now time.Time) {
	m.status = store.StatusResolved
	m.result = result
	m.resolvedAt = now
	m.updatedAt = now
	m.version++
	g.dropLiveMarket(m)
	settlement := 0
	if result == "yes" {
		settlement = 1
	}
	for _, q := range m.quotes {
		if q != nil {
			s := settlement
			if q.complement {
				s = 1 - settlement
			}
			q.bid, q.ask, q.last = -1, -1, s*q.unit
		}
	}
	m.priceVersion++
	m.priceTS = now
	g.emit(g.marketMsg(m), g.priceMsg(m))
}

// requoteAll requotes every venue of m at its current fair value, as a new
// price version.
func (g *Generator) requoteAll(m *market, now time.Time) {
	for _, q := range m.quotes {
		if q != nil {
			g.requote(m, q)
		}
	}
	m.quotedP = m.p
	m.priceVersion++
	m.priceTS = now
}

func (g *Generator) closeEvent(e *event, now time.Time) {
	e.status = store.StatusResolved
	e.updatedAt = now
	e.version++
	g.dropLiveEvent(e)
	g.emit(g.eventMsg(e))
}

// mergeEvent finds that one live event duplicates another: the duplicate is
// merged into the survivor, which takes over its volume. The duplicate's
// markets stop trading but keep their status; the merge hides them. A hot
// event is never the duplicate (it gets an event update instead).
func (g *Generator) mergeEvent(now time.Time) {
	dup := pick(g.rng, g.liveEvents)
	if dup.hot {
		g.updateEvent(dup, now)
		return
	}
	var into *event
	for try := 0; try < 8; try++ {
		c := pick(g.rng, g.liveEvents)
		if c == dup {
			continue
		}
		into = c
		if venues(c) >= 2 { // prefer a survivor that is served
			break
		}
	}
	if into == nil {
		g.updateEvent(dup, now)
		return
	}
	dup.status = store.StatusMerged
	dup.mergedInto = into.id
	dup.updatedAt = now
	dup.version++
	g.dropLiveEvent(dup)
	for _, m := range dup.markets {
		g.dropLiveMarket(m)
	}
	into.volume = cents(into.volume + dup.volume)
	into.updatedAt = now
	into.version++
	g.emit(g.eventMsg(dup), g.eventMsg(into))
}

// updateEvent republishes e with its volume brought up to date; one time in
// four, e also gets listed on a venue it was missing from, with its active
// markets, which then quote there too.
func (g *Generator) updateEvent(e *event, now time.Time) {
	var missing []int
	for v, id := range e.venues {
		if id == "" {
			missing = append(missing, v)
		}
	}
	e.volume = cents(e.volume + math.Exp(6+1.5*g.rng.NormFloat64()))
	e.updatedAt = now
	e.version++
	if len(missing) == 0 || g.rng.IntN(4) != 0 {
		g.emit(g.eventMsg(e))
		return
	}
	v := pick(g.rng, missing)
	e.venues[v] = g.ids.event(v, draft{title: e.title, stem: e.stem, code: e.code})
	e.links[v] = g.eventLink(e, v)
	g.hotStale = true // with one venue more, e may now be among the hot events
	g.emit(g.eventMsg(e))
	var listed []*market
	for _, m := range e.markets {
		if m.status != store.StatusActive {
			continue
		}
		g.listMarket(m, v)
		m.updatedAt = now
		m.version++
		g.requoteAll(m, now) // its other venues too: their quotes may lag the fair value
		g.emit(g.marketMsg(m))
		listed = append(listed, m)
	}
	for _, m := range listed {
		g.emit(g.priceMsg(m))
	}
}

func venues(e *event) int {
	n := 0
	for _, id := range e.venues {
		if id != "" {
			n++
		}
	}
	return n
}

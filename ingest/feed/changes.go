package feed

import (
	"math"
	"time"

	"github.com/marketdata/marketdata/store"
)

// rareChange is one of the changes other than prices and trades. Resolutions
// and merges shrink the live world and new events grow it; the choice leans
// towards whichever keeps about cfg.Events events live.
func (g *Generator) rareChange(now time.Time) {
	live, target := len(g.liveEvents), g.cfg.Events
	switch x := g.rng.Float64(); {
	case x < 0.40:
		g.resolveMarket(pick(g.rng, g.liveMarkets), now)
	case x < 0.65:
		g.updateEvent(pick(g.rng, g.liveEvents), now)
	case x < 0.85:
		if live > target+target/10 {
			g.resolveEvent(pick(g.rng, g.liveEvents), now)
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
		g.resolveEvent(pick(g.rng, g.liveEvents), now)
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

// resolveMarket settles m, more likely "yes" the higher it trades, and
// resolves its event when m was the event's last active market.
func (g *Generator) resolveMarket(m *market, now time.Time) {
	g.settle(m, now)
	for _, other := range m.ev.markets {
		if other.status == store.StatusActive {
			return
		}
	}
	g.closeEvent(m.ev, now)
}

// resolveEvent settles every active market of e, then e itself.
func (g *Generator) resolveEvent(e *event, now time.Time) {
	for _, m := range e.markets {
		if m.status == store.StatusActive {
			g.settle(m, now)
		}
	}
	g.closeEvent(e, now)
}

func (g *Generator) settle(m *market, now time.Time) {
	m.status = store.StatusResolved
	m.result = "no"
	if g.rng.Float64() < sigmoid(m.fair) {
		m.result = "yes"
	}
	m.resolvedAt = now
	m.updatedAt = now
	m.version++
	g.dropLiveMarket(m)
	g.emit(g.marketMsg(m))
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
// markets stop trading but keep their status; the merge hides them.
func (g *Generator) mergeEvent(now time.Time) {
	dup := pick(g.rng, g.liveEvents)
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
	g.emit(g.eventMsg(e))
	var listed []*market
	for _, m := range e.markets {
		if m.status != store.StatusActive {
			continue
		}
		g.listMarket(m, v)
		m.updatedAt = now
		m.version++
		m.priceVersion++
		m.priceTS = now
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

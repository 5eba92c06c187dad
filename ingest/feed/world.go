package feed

import (
	"fmt"
	"math"
	"time"

	"github.com/marketdata/marketdata/store"
)

// event is the generator's state of one cross-venue event.
type event struct {
	id         string
	version    int64
	title      string
	category   string
	status     string
	mergedInto string
	venues     [4]string       // the event's id on each venue; "" when not listed there
	links      [4]*store.Match // the matcher's metadata per venue (matches.go); nil: none
	stem, code string          // its venue_a ticker parts, for a later listing there
	volume     float64
	updatedAt  time.Time
	markets    []*market
	slot       int  // position in Generator.liveEvents; -1 once resolved or merged
	hot        bool // some of its markets are hot: it neither resolves nor merges
	lastMsg    Msg  // the message of the current version

	// The fair-value model of its markets (see draft).
	kind   kind
	upward bool    // ladder: market i is "X ≤ threshold" rather than "X > threshold"
	mu, sd float64 // ladder: the latent quantity's mean and standard deviation
	anchor float64 // ladder: the mean mu reverts to
	vol    float64 // ladder: one step of mu, in units of sd
}

// market is the generator's state of one market and of its quotes.
type market struct {
	id         string
	ev         *event
	version    int64
	title      string
	status     string
	venues     [4]string       // the market's id on each venue; "" when not listed there
	links      [4]*store.Match // the matcher's metadata per venue (matches.go); nil: none
	resolvedAt time.Time
	result     string
	updatedAt  time.Time

	p            float64   // the fair probability of "yes" the quotes wander around
	logit        float64   // exclusive and binary events: the market's logit (see event.reprice)
	threshold    float64   // ladder events: the market's threshold on the latent quantity
	quotedP      float64   // p when all its venues were last quoted
	volatility   float64   // standard deviation of one step of logit
	quotes       [4]*quote // nil where the market is not listed
	priceVersion int64
	priceTS      time.Time
	slot         int       // position in Generator.liveMarkets; -1 when not trading
	hot          bool      // in the hot set (hot.go)
	hotDue       time.Time // when hot: when its next price is due
	lastMsg      Msg       // the market message of the current version
	lastPrice    Msg       // the price message of the current price version
}

// venueCount draws how many venues a new event is listed on: about 10% of
// events are on one venue only (and so not served), the rest on 2–4.
func (g *Generator) venueCount() int {
	switch x := g.rng.Float64(); {
	case x < 0.10:
		return 1
	case x < 0.45:
		return 2
	case x < 0.75:
		return 3
	default:
		return 4
	}
}

// newEvent invents an event with its markets and quotes, registers it as
// live and returns it. Its entities start at version base+1.
//
// Event n is the same in every run of a seed: the initial world's events
// come from the seed's draws, and an event added during a run is drawn from
// the seed and n alone, leaving the run's draws where they were. So a
// restarted feed, whose changes differ from the earlier run's, adds the same
// events under the same ids (only at other times), never another event
// under an id an earlier run used.
func (g *Generator) newEvent(now time.Time) *event {
	n := len(g.events) + 1
	if g.built {
		run, err := g.pcg.MarshalBinary()
		if err != nil {
			panic("feed: PCG state: " + err.Error()) // PCG.MarshalBinary never fails
		}
		g.pcg.Seed(g.cfg.Seed^eventSalt, uint64(n))
		defer func() {
			if err := g.pcg.UnmarshalBinary(run); err != nil {
				panic("feed: PCG state: " + err.Error()) // its own output
			}
		}()
	}
	lo, hi := g.cfg.MarketsPerEvent[0], g.cfg.MarketsPerEvent[1]
	k := lo + g.rng.IntN(hi-lo+1)

	d := g.draft(k)
	g.titles[d.title] = true

	e := &event{
		id:        fmt.Sprintf("ev_%06d", n),
		version:   g.base + 1,
		title:     d.title,
		category:  d.category,
		stem:      d.stem,
		code:      d.code,
		status:    store.StatusActive,
		volume:    cents(math.Exp(10 + 1.4*g.rng.NormFloat64())),
		updatedAt: now,
		kind:      d.kind,
		upward:    d.upward,
		mu:        d.mu,
		sd:        d.sd,
		anchor:    d.mu,
		vol:       0.01 + 0.03*g.rng.Float64(),
	}
	for _, v := range g.rng.Perm(len(store.Venues))[:g.venueCount()] {
		e.venues[v] = g.ids.event(v, d)
		e.links[v] = g.eventLink(e, v)
	}
	for i, label := range d.labels {
		m := &market{
			id:           fmt.Sprintf("mk_%06d_%02d", n, i+1),
			ev:           e,
			version:      g.base + 1,
			title:        label,
			status:       store.StatusActive,
			updatedAt:    now,
			volatility:   0.02 + 0.06*g.rng.Float64(),
			priceVersion: g.base + 1,
			priceTS:      now,
		}
		switch d.kind {
		case ladder:
			m.threshold = d.thresholds[i]
		case exclusive:
			m.logit = g.rng.NormFloat64()
		default:
			m.logit = -0.4 + 1.3*g.rng.NormFloat64()
		}
		e.markets = append(e.markets, m)
	}
	e.reprice()
	for _, m := range e.markets {
		for v, evID := range e.venues {
			if evID != "" {
				g.listMarket(m, v)
			}
		}
		m.quotedP = m.p
		g.markets = append(g.markets, m)
		g.addLiveMarket(m)
	}
	g.events = append(g.events, e)
	g.addLiveEvent(e)
	return e
}

// draft invents an event of k markets: a template that has a sensible event
// of that size, preferring a title not used yet.
func (g *Generator) draft(k int) draft {
	var d draft
	for try := 0; ; try++ {
		t := pick(g.rng, templates)
		next, ok := t(g.rng, g.epoch, k)
		if !ok {
			continue
		}
		d = next
		if !g.titles[d.title] || try >= 32 {
			return d
		}
	}
}

// listMarket gives market m an id, its link and a fresh quote on venue v.
func (g *Generator) listMarket(m *market, v int) {
	m.venues[v] = g.ids.market(v, m.ev.venues[v], m.title)
	m.links[v] = g.marketLink(m, v)
	q := &quote{
		unit:       venueTicks[v],
		bias:       venueBias * g.rng.NormFloat64(),
		vol:        math.Exp(7 + 1.2*g.rng.NormFloat64()),
		complement: m.complement(v),
	}
	g.requote(m, q)
	m.quotes[v] = q
}

func (g *Generator) addLiveEvent(e *event) {
	e.slot = len(g.liveEvents)
	g.liveEvents = append(g.liveEvents, e)
	g.hotStale = true
}

func (g *Generator) dropLiveEvent(e *event) {
	if e.slot < 0 {
		return
	}
	last := g.liveEvents[len(g.liveEvents)-1]
	g.liveEvents[e.slot], last.slot = last, e.slot
	g.liveEvents = g.liveEvents[:len(g.liveEvents)-1]
	e.slot = -1
	g.hotStale = g.hotStale || e.hot
}

func (g *Generator) addLiveMarket(m *market) {
	m.slot = len(g.liveMarkets)
	g.liveMarkets = append(g.liveMarkets, m)
}

func (g *Generator) dropLiveMarket(m *market) {
	if m.slot < 0 {
		return
	}
	last := g.liveMarkets[len(g.liveMarkets)-1]
	g.liveMarkets[m.slot], last.slot = last, m.slot
	g.liveMarkets = g.liveMarkets[:len(g.liveMarkets)-1]
	m.slot = -1
	g.hotStale = g.hotStale || m.hot
}

// cents rounds v to two decimals.
func cents(v float64) float64 { return math.Round(v*100) / 100 }

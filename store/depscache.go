package store

import "sync"

// depsCache keeps, per market, the market and event rows a price item
// derives from besides its price, with the doc_revs.deps stamp they were read
// at. A price batch sends each market's cached stamp; the statement that
// takes the documents' revisions compares it with the stored one under the
// document's row lock and reads the market and event rows only where they
// differ. Every change of a market row or of its event gives the market's
// document a fresh stamp (under the same lock), from whichever process made
// it, so an entry whose stamp still matches is the current state: the cache
// is checked by Postgres on every use and cannot serve a stale row, however
// many ingest processes write.
type depsCache struct {
	mu      sync.Mutex
	max     int
	markets map[string]depsEntry
	// events interns event rows by id: an event's row at one version never
	// changes (an update needs a higher version), so markets of one event
	// share one copy.
	events map[string]*Event
}

// depsEntry is one market's cached rows. Market is nil while the market is
// unknown (its price came first), Event while its event is.
type depsEntry struct {
	deps   int64
	market *Market
	event  *Event
}

// defaultDepsCacheSize bounds the entries one process keeps, an estimated 600 bytes
// each: a 250,000-market world takes ~150 MB.
const defaultDepsCacheSize = 1 << 19

func newDepsCache(max int) *depsCache {
	return &depsCache{max: max, markets: map[string]depsEntry{}, events: map[string]*Event{}}
}

// get returns the entries of ids; a missing one has ok false.
func (c *depsCache) get(ids []string) []depsEntry {
	out := make([]depsEntry, len(ids))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range ids {
		if e, ok := c.markets[id]; ok {
			out[i] = e
		} else {
			out[i].deps = -1 // stored stamps are >= 0: never a match
		}
	}
	return out
}

// put records rows read at stamp deps (m as PriceItemMarket projects it),
// unless a newer stamp is already recorded (stamps of one document grow with
// commit order). It returns the event to use, interned.
func (c *depsCache) put(id string, deps int64, m *Market, e *Event) *Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e != nil {
		if have := c.events[e.ID]; have != nil && have.Version == e.Version {
			e = have
		} else {
			c.events[e.ID] = e
		}
	}
	if old, ok := c.markets[id]; ok && old.deps > deps {
		return e
	}
	if len(c.markets) >= c.max {
		// Full: drop an arbitrary tenth. A dropped market is read once more.
		n := c.max / 10
		for k := range c.markets {
			delete(c.markets, k)
			if n--; n <= 0 {
				break
			}
		}
		if len(c.events) >= c.max {
			clear(c.events)
		}
	}
	c.markets[id] = depsEntry{deps: deps, market: m, event: e}
	return e
}

// PriceItemMarket is m with only the fields a market's price item derives
// from (MarketDoc): id, event, version, status, resolution time and each
// venue's match relation. The deps cache keeps this projection, so the
// documents of the price path carry it: a market's title, venue ids, result,
// update time and match confidence and method are not read for a price, and
// on a 250,000-market world they were 3.3 million of the 4.1 million objects
// of ingest's heap, which every garbage collection marks (about 40 % of
// ingest's CPU there, 2026-11-28). Its Matches are shared: read them, never
// write them.
func PriceItemMarket(m *Market) *Market {
	if m == nil {
		return nil
	}
	out := &Market{ID: m.ID, EventID: m.EventID, Version: m.Version, Status: internStatus(m.Status), ResolvedAt: m.ResolvedAt}
	for i, x := range m.Matches {
		if x != nil {
			out.Matches[i] = relationOnly(x.Relation)
		}
	}
	return out
}

// relationMatches are the shared relation-only matches of PriceItemMarket.
var relationMatches = func() map[string]*Match {
	out := map[string]*Match{}
	for _, r := range []string{RelationIdentity, RelationComplement, RelationSubset, RelationSuperset, RelationOverlap} {
		out[r] = &Match{Relation: r}
	}
	return out
}()

// relationOnly is a match with only relation r: a shared one for the known
// relations, a new one otherwise.
func relationOnly(r string) *Match {
	if m := relationMatches[r]; m != nil {
		return m
	}
	return &Match{Relation: r}
}

// internStatus returns the constant for a known market status, so cached
// markets do not each hold a copy of it.
func internStatus(s string) string {
	switch s {
	case StatusActive:
		return StatusActive
	case StatusResolved:
		return StatusResolved
	case StatusMerged:
		return StatusMerged
	}
	return s
}

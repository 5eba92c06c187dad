package api

import (
	"slices"
	"sync"
	"time"
)

// pageCache keeps the /events pages the node read from Redis, so that the
// pages many clients poll (the first page of a filter, mostly) cost Redis
// only their limit check. It is kept fresh like priceCache: a change notice
// drops every page whose id range holds an event the batch rewrote (an
// event that appeared, changed, resolved or merged there), and the TTL
// bounds how stale a page can be when a notice is lost or Redis was rebuilt
// without one. A read that began before a drop does not store its answer.
//
// A page is what the listing held from just above its cursor: its ids,
// ascending, and their summaries. The answer's next_cursor is bound to the
// caller's account, so it is made per request, never kept.
type pageCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu    sync.RWMutex
	pages map[pageKey]*listedPage
	// epoch counts the drops; a read stores its page only if it did not
	// move while the read ran.
	epoch uint64
}

// pageKey is one read of the listing: a set, the id the page starts above
// ("" from the start) and how many ids were asked for.
type pageKey struct {
	set, after string
	count      int
}

type listedPage struct {
	ids  []string
	sums [][]byte
	// last is the page's highest id; a page with fewer ids than asked for
	// reached the end of the set, and any id above after may join it.
	last    string
	full    bool
	fetched time.Time
}

func newPageCache(ttl time.Duration, max int, now func() time.Time) *pageCache {
	return &pageCache{ttl: ttl, max: max, now: now, pages: map[pageKey]*listedPage{}}
}

// lookup returns the page of k if the node holds it fresh, and the epoch a
// read of it from Redis must store with.
func (p *pageCache) lookup(k pageKey) (ids []string, sums [][]byte, ok bool, epoch uint64) {
	now := p.now()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if pg := p.pages[k]; pg != nil && now.Sub(pg.fetched) < p.ttl {
		return pg.ids, pg.sums, true, p.epoch
	}
	return nil, nil, false, p.epoch
}

// store keeps a page read from Redis, unless a drop happened since the read
// began (epoch is what lookup returned). ids and sums must not be changed
// afterwards: readers share them.
func (p *pageCache) store(k pageKey, ids []string, sums [][]byte, epoch uint64, fetched time.Time) {
	pg := &listedPage{ids: ids, sums: sums, full: len(ids) >= k.count, fetched: fetched}
	if len(ids) > 0 {
		pg.last = ids[len(ids)-1]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.epoch != epoch {
		return
	}
	if len(p.pages) >= p.max {
		clear(p.pages) // a rare reset beats unbounded memory
	}
	p.pages[k] = pg
}

// drop forgets the pages whose range holds one of the events ids.
func (p *pageCache) drop(ids []string) {
	sorted := slices.Sorted(slices.Values(ids))
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
	for k, pg := range p.pages {
		// The lowest id above the page's start decides: in its range or not.
		i, found := slices.BinarySearch(sorted, k.after)
		if found {
			i++
		}
		if i < len(sorted) && (!pg.full || sorted[i] <= pg.last) {
			delete(p.pages, k)
		}
	}
}

// flush forgets every page.
func (p *pageCache) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
	clear(p.pages)
}

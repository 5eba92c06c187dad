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
	// max bounds the pages held, maxBytes their summaries' bytes.
	max, maxBytes int
	now           func() time.Time

	mu    sync.RWMutex
	pages map[pageKey]*listedPage
	bytes int
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
	ids     []string
	sums    [][]byte
	fetched time.Time
	// size is what the page counts against maxBytes.
	size int
}

func newPageCache(ttl time.Duration, max, maxBytes int, now func() time.Time) *pageCache {
	return &pageCache{ttl: ttl, max: max, maxBytes: maxBytes, now: now, pages: map[pageKey]*listedPage{}}
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
	pg := &listedPage{ids: ids, sums: sums, fetched: fetched}
	for i := range ids {
		pg.size += len(ids[i]) + len(sums[i])
	}
	if pg.size > p.maxBytes/4 {
		return // a page of huge summaries would evict everything else
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.epoch != epoch {
		return
	}
	if old := p.pages[k]; old != nil {
		p.remove(k, old)
	}
	if p.noRoom(pg) {
		// Expired pages go first; then pages at random (map order) until
		// this one fits: a walker's pages, read once each, take turns
		// with the polled ones rather than wiping them all.
		now := p.now()
		for k, old := range p.pages {
			if now.Sub(old.fetched) >= p.ttl {
				p.remove(k, old)
			}
		}
		for k, old := range p.pages {
			if !p.noRoom(pg) {
				break
			}
			p.remove(k, old)
		}
	}
	p.pages[k] = pg
	p.bytes += pg.size
}

// noRoom says whether pg does not fit; the caller holds mu.
func (p *pageCache) noRoom(pg *listedPage) bool {
	return len(p.pages) >= p.max || p.bytes+pg.size > p.maxBytes
}

// remove forgets one page; the caller holds mu.
func (p *pageCache) remove(k pageKey, pg *listedPage) {
	delete(p.pages, k)
	p.bytes -= pg.size
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
		// A page with fewer ids than asked for reached the end of its set:
		// any id above its start may join it. A full one covers up to its
		// last id.
		if i < len(sorted) && (len(pg.ids) < k.count || sorted[i] <= pg.ids[len(pg.ids)-1]) {
			p.remove(k, pg)
		}
	}
}

// flush forgets every page.
func (p *pageCache) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
	clear(p.pages)
	p.bytes = 0
}

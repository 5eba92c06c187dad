package cache

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/store"
)

// Page is one read of the /events listing: up to count listed events above
// a cursor, ascending by id, and their summaries. An id whose summary is
// gone (pruned by a rebuild at that moment) has a nil summary: it moves the
// cursor but is not shown. Pages are shared between requests (node
// memory): read them, never change them.
type Page struct {
	IDs       []string
	Summaries [][]byte
	// Resume is where the next page starts when the read of a filtered
	// page examined as many events as it may (ReaderConfig.FilterScan)
	// before it had count: the last id it examined, above which the walk
	// goes on. "" when the page is full or reached the end of its set;
	// always "" for an unfiltered page.
	Resume string
	// memo holds answers rendered from a page node memory holds (Rendered).
	memo *pageMemo
}

// pageMemo is the answers rendered from one held page, by the caller's key.
type pageMemo struct {
	mu sync.Mutex
	m  map[string]Rendered
}

// Rendered is an answer made from a page, and the tag the caller gives it.
type Rendered struct {
	Body []byte
	Tag  string
}

// maxPageMemos bounds the answers kept per held page (a page's answers
// differ by account: the next cursor is bound to it).
const maxPageMemos = 64

// Rendered returns the answer render makes of the page, made once per key
// while node memory holds the page (and every time for a page it does
// not). The answer is shared: never change it.
func (pg Page) Rendered(key string, render func() Rendered) Rendered {
	if pg.memo == nil {
		return render()
	}
	pg.memo.mu.Lock()
	r, ok := pg.memo.m[key]
	pg.memo.mu.Unlock()
	if ok {
		return r
	}
	r = render()
	pg.memo.mu.Lock()
	if len(pg.memo.m) >= maxPageMemos {
		clear(pg.memo.m)
	}
	pg.memo.m[key] = r
	pg.memo.mu.Unlock()
	return r
}

// pageKey is one read of the listing: a set, the match filter (matchKey;
// "" for none), the id the page starts above ("" from the start) and how
// many ids were asked for. The answer's next_cursor is bound to the
// caller's account, so the API makes it per request; it is never part of
// what is held.
type pageKey struct {
	set, match, after string
	count             int
}

func pageKeyOf(f store.ListFilter, after string, count int) pageKey {
	return pageKey{set: ListSet(f), match: matchKey(f.MatchFilter), after: after, count: count}
}

// ListSet names the listing set of an /events filter.
func ListSet(f store.ListFilter) string {
	minVenues := ""
	if f.MinVenues >= 2 {
		minVenues = strconv.Itoa(f.MinVenues)
	}
	return SetName(f.Category, f.Venue, minVenues)
}

// Page returns up to count listed events of filter f with ids above after.
// The pages many clients poll (the first of a filter, mostly) are held in
// node memory; pages read from the store (while Redis does not hold the
// whole listing) are not.
func (r *Reader) Page(ctx context.Context, f store.ListFilter, after string, count int) (Page, error) {
	return r.BeginPage(ctx, f, after, count).Finish(ctx)
}

// PageRead is a page read begun (BeginPage) and not yet finished: its node
// memory lookup is done and its Redis round trip is on its way.
type PageRead struct {
	r        *Reader
	f        store.ListFilter
	k        pageKey
	after    string
	epoch    uint64
	held     Page
	isHeld   bool
	cmd      *redis.Cmd
	tr       *trip
	beginErr error
}

// PageHeld returns the page from node memory, with no round trip, while
// the node follows the change notices whole (see EventHeld, and its word
// on order).
func (r *Reader) PageHeld(f store.ListFilter, after string, count int) (Page, bool) {
	if !r.followsWhole() {
		return Page{}, false
	}
	pg, ok := r.pages.get(pageKeyOf(f, after, count))
	if ok {
		r.count(resPage, layerMemory, 1)
	}
	return pg, ok
}

// BeginPage starts Page: it looks the page up in node memory and queues
// the round trip (the change number, and the page when memory lacks it),
// and returns without waiting for Redis, so that the caller can run its
// admission meanwhile. Finish completes it, or Discard drops it; only
// Finish reads the store.
func (r *Reader) BeginPage(ctx context.Context, f store.ListFilter, after string, count int) *PageRead {
	p := &PageRead{r: r, f: f, k: pageKeyOf(f, after, count), after: after, epoch: r.g.now()}
	p.held, p.isHeld = r.pages.get(p.k)
	var queue func(redis.Pipeliner)
	if !p.isHeld {
		queue = p.queue
	}
	p.tr, p.beginErr = r.trips.begin(ctx, queue)
	return p
}

func (p *PageRead) queue(pl redis.Pipeliner) {
	if p.f.MatchFilter.Active() {
		p.cmd = p.r.cache.QueueFilteredPage(pl, p.k.set, p.f.MatchFilter, p.after, p.k.count, p.r.cfg.FilterScan)
		return
	}
	p.cmd = p.r.cache.QueueListPage(pl, p.k.set, p.after, p.k.count)
}

// parse reads the page the round trip brought.
func (p *PageRead) parse(ctx context.Context) (Page, error) {
	if p.f.MatchFilter.Active() {
		ids, sums, resume, err := p.r.cache.ParseFilteredPage(ctx, p.cmd, p.k.set, p.f.MatchFilter, p.after, p.k.count, p.r.cfg.FilterScan)
		return Page{IDs: ids, Summaries: sums, Resume: resume}, err
	}
	ids, sums, err := p.r.cache.ParseListPage(ctx, p.cmd, p.k.set, p.after, p.k.count)
	return Page{IDs: ids, Summaries: sums}, err
}

// Discard drops a read that will not be finished; nil is none.
func (p *PageRead) Discard() {
	if p != nil && p.tr != nil {
		p.r.trips.discard(p.tr)
	}
}

// wait is the verdict of the begun round trip.
func (p *PageRead) wait(ctx context.Context) verdict {
	if p.beginErr != nil {
		return p.r.verdictOf(ctx, 0, nil, p.beginErr)
	}
	seq, seqErr, err := p.r.trips.wait(ctx, p.tr)
	return p.r.verdictOf(ctx, seq, seqErr, err)
}

// Finish waits for the read's round trip and completes it: the page from
// memory if it may still answer, else from Redis, else from the store.
func (p *PageRead) Finish(ctx context.Context) (Page, error) {
	r, k, after, count, epoch := p.r, p.k, p.after, p.k.count, p.epoch
	var v verdict
	if p.isHeld {
		v = p.wait(ctx)
		if pg, ok := stillHeld(r, v, epoch, p.held, func() (Page, bool) { return r.pages.get(k) }); ok {
			r.count(resPage, layerMemory, 1)
			return pg, nil
		}
		v = r.roundTrip(ctx, p.queue)
	} else {
		v = p.wait(ctx)
	}
	redisErr := v.redisErr
	if redisErr == nil {
		pg, err := p.parse(ctx)
		if err == nil {
			if v.keep {
				pg.memo = &pageMemo{m: map[string]Rendered{}}
				k.after = strings.Clone(after)
				r.pages.put(k, pg, epoch)
			}
			r.count(resPage, layerRedis, 1)
			return pg, nil
		}
		// The listing is not whole in Redis (or the read failed): the
		// store has it all.
		redisErr = err
	}
	events, err := r.store.ListedEvents(ctx, p.f, after, count)
	if err != nil {
		if errors.Is(redisErr, ErrListingIncomplete) {
			redisErr = nil // Redis answered; only the store failed
		}
		return Page{}, unavailable(redisErr, err)
	}
	r.count(resPage, layerStore, 1)
	var pg Page
	for i := range events {
		d := r.rules.RenderEvent(store.EventDoc{ID: events[i].ID, Event: &events[i]})
		pg.IDs, pg.Summaries = append(pg.IDs, events[i].ID), append(pg.Summaries, d.Summary)
	}
	return pg, nil
}

// pageWeight is what a held page counts against PageBytes.
func pageWeight(k pageKey, pg Page) uint32 {
	n := entryOverhead + len(k.set) + len(k.match) + len(k.after) + len(pg.Resume)
	for i := range pg.IDs {
		n += len(pg.IDs[i]) + len(pg.Summaries[i]) + 40 // the slices' headers
	}
	return uint32(n)
}

// pagesHolding matches the held pages whose id range holds one of the
// events ids (an event that appeared, changed, resolved or merged there):
// a page with fewer ids than asked for reached the end of its set, so any
// id above its start may join it; a full one covers up to its last id; a
// filtered page that stopped on its scan bound covers up to where it
// stopped (Resume), the events it skipped included: one whose metadata
// changes may now pass.
func pagesHolding(ids []string) func(pageKey, Page) bool {
	sorted := slices.Sorted(slices.Values(ids))
	return func(k pageKey, pg Page) bool {
		// The lowest id above the page's start decides: in its range or not.
		i, found := slices.BinarySearch(sorted, k.after)
		if found {
			i++
		}
		if i == len(sorted) {
			return false
		}
		if pg.Resume != "" {
			return sorted[i] <= pg.Resume
		}
		return len(pg.IDs) < k.count || sorted[i] <= pg.IDs[len(pg.IDs)-1]
	}
}

package api

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketdata/marketdata/cache"
)

// summarySource is what the search index reads: the summaries of the served
// active events (cache key P{i}:s).
type summarySource interface {
	Summaries(ctx context.Context) (map[string][]byte, error)
	SummariesOf(ctx context.Context, ids []string) (map[string][]byte, error)
}

var _ summarySource = (*cache.Reader)(nil)

// searchIndex answers /markets/search from memory (contract §3). Redis holds
// no index that ranks by "title starts with, then contains", and 50,000
// titles fit easily in a node, so every node keeps them all: a full Load at
// start and periodically (Run, the safety net for lost notices), and an
// Update of the ids each ingest change notice names.
//
// Readers never lock: they scan an immutable snapshot, already in answer
// order, that writers replace (copy-on-write) through an atomic pointer. The
// snapshot is a run of blocks of a few hundred entries, so an Update rebuilds
// only the blocks its ids leave or enter and shares the others: a notice
// costs microseconds, not a copy of the whole index, and is visible to the
// next Search as soon as Update returns.
type searchIndex struct {
	src summarySource
	// log reports summaries that cannot be read and failed resyncs.
	log  *slog.Logger
	snap atomic.Pointer[searchSnapshot]
	// memos are rendered answers by query (see answer).
	memos     sync.Map
	memoCount atomic.Int64
	// loaded is set by the first successful Load.
	loaded atomic.Bool
	// blockSize is searchBlockSize (tests make it small).
	blockSize int

	// loadMu lets one Load read at a time.
	loadMu sync.Mutex
	// reload asks Run for a full Load now (RequestReload); requests made
	// while one is pending are one request.
	reload chan struct{}
	// pending holds the ids of change notices not yet re-read (Enqueue);
	// kick wakes RunUpdates.
	pendingMu sync.Mutex
	pending   map[string]struct{}
	kick      chan struct{}
	// mu serializes writers: every Update (its read included, so that two
	// Updates of one id install in the order they read) and the install
	// step of a Load.
	mu sync.Mutex
	// vol is the volume of every id in the current snapshot: with the id, it
	// locates the id's entry in the sorted snapshot by binary search.
	vol map[string]float64
	// dirty collects the ids that Updates changed while a Load was reading
	// (nil when none is). The Load's copy of them may be older than the
	// Update's, so it keeps the Update's.
	dirty map[string]struct{}
}

// searchBlockSize is the size of blocks a Load cuts; an Update splits a
// block grown past twice that and joins one shrunk below half of it to the
// next. A block's text is then about 10 KB: long enough for vectorised
// search, short enough to rebuild in microseconds.
const searchBlockSize = 256

// searchSep precedes every title in a block's text. Ingest refuses titles
// with NUL; the index replaces any in a cached title all the same, so that a
// match never runs from one title into the next.
const searchSep = '\x00'

// searchSnapshot is one immutable state of the index: its blocks in order,
// each non-empty. Entries are sorted by volume desc, then id asc (bytewise):
// the order of each answer group, so a search walks forward once and never
// sorts.
type searchSnapshot struct {
	blocks []*searchBlock
	n      int
}

// searchBlock lays its lowered titles end to end in one string, so that a
// search is a few strings.Index calls over contiguous memory (vectorised)
// instead of a call per title.
type searchBlock struct {
	entries []searchEntry
	// text is searchSep + title 0 + searchSep + title 1 ... + searchSep.
	text string
	// starts[i] is the offset in text of the separator before title i;
	// starts[len(entries)] is the final separator's, so title i is
	// text[starts[i]+1 : starts[i+1]].
	starts []int
	// firsts[i] is the first byte of title i (searchSep when empty).
	firsts string
	// grams has the bit of every byte pair in the block's titles set (and
	// maybe more: see merge): a query with a pair whose bit is clear matches
	// nowhere in the block, so a search that would find nothing skips most
	// blocks unread.
	grams *searchGrams
}

// searchGrams is a block's pair filter: 1 KB, for about 1,000 distinct
// pairs in 256 titles.
type searchGrams [8192 / 64]uint64

// add sets the bits of the pairs of t.
func (g *searchGrams) add(t string) {
	for j := 1; j < len(t); j++ {
		k := gram(t[j-1], t[j])
		g[k/64] |= 1 << (k % 64)
	}
}

// or sets the bits set in o.
func (g *searchGrams) or(o *searchGrams) {
	for i := range g {
		g[i] |= o[i]
	}
}

// gram is the filter bit of the byte pair a, b.
func gram(a, b byte) uint32 {
	return (uint32(a)<<8 | uint32(b)) * 0x9E3779B1 >> (32 - 13)
}

// mayHold reports whether every pair of q's may be in the block.
func (b *searchBlock) mayHold(grams []uint32) bool {
	for _, g := range grams {
		if b.grams[g/64]&(1<<(g%64)) == 0 {
			return false
		}
	}
	return true
}

type searchEntry struct {
	id     string
	volume float64
	// raw is the summary as cached, answered untouched.
	raw []byte
}

// searchItem is an entry with its lowered title, on its way into a block.
type searchItem struct {
	searchEntry
	lower string
}

// compareEntries orders entries as answers list them.
func compareEntries(a, b *searchEntry) int {
	if c := cmp.Compare(b.volume, a.volume); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

func compareItems(a, b searchItem) int { return compareEntries(&a.searchEntry, &b.searchEntry) }

// newSearchIndex returns an empty index on src; Load (or Run) fills it.
func newSearchIndex(src summarySource) *searchIndex {
	x := &searchIndex{src: src, log: slog.Default(), vol: map[string]float64{}, blockSize: searchBlockSize,
		reload: make(chan struct{}, 1), pending: map[string]struct{}{}, kick: make(chan struct{}, 1)}
	x.snap.Store(&searchSnapshot{})
	return x
}

// Ready reports whether the index has loaded at least once (for /readyz).
func (x *searchIndex) Ready() bool { return x.loaded.Load() }

// Len is the number of events the index holds.
func (x *searchIndex) Len() int { return x.snap.Load().n }

// parseSummary reads a cached summary; false when it cannot be read or names
// another event than its key (cache never writes either).
func (x *searchIndex) parseSummary(id string, raw []byte) (searchItem, bool) {
	var s struct {
		UniversalID string  `json:"universal_id"`
		Title       string  `json:"title"`
		Volume      float64 `json:"volume"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.UniversalID != id {
		x.log.Warn("search: summary skipped", "event_id", id, "err", err)
		return searchItem{}, false
	}
	lower := strings.ReplaceAll(strings.ToLower(s.Title), string(searchSep), "\uFFFD")
	return searchItem{searchEntry{id: id, volume: s.Volume, raw: raw}, lower}, true
}

// Load replaces the index with every summary in the cache.
func (x *searchIndex) Load(ctx context.Context) error {
	x.loadMu.Lock()
	defer x.loadMu.Unlock()
	x.mu.Lock()
	x.dirty = map[string]struct{}{}
	x.mu.Unlock()

	all, err := x.src.Summaries(ctx)
	if err != nil {
		x.mu.Lock()
		x.dirty = nil
		x.mu.Unlock()
		return fmt.Errorf("search: load: %w", err)
	}
	// Parse, sort and lay out outside mu: Updates go on meanwhile.
	items := make([]searchItem, 0, len(all))
	vol := make(map[string]float64, len(all))
	for id, raw := range all {
		if it, ok := x.parseSummary(id, raw); ok {
			items = append(items, it)
			vol[id] = it.volume
		}
	}
	slices.SortFunc(items, compareItems)
	loaded := &searchSnapshot{n: len(items)}
	for chunk := range slices.Chunk(items, x.blockSize) {
		loaded.blocks = append(loaded.blocks, newSearchBlock(chunk, nil))
	}

	x.mu.Lock()
	defer x.mu.Unlock()
	// Ids updated during the read keep the state the Updates left: the
	// current entry, or none when they left the listing.
	cur := x.snap.Load()
	changes := make(map[string]*searchItem, len(x.dirty))
	for id := range x.dirty {
		changes[id] = nil
		if v, ok := x.vol[id]; ok {
			changes[id] = cur.find(id, v)
		}
	}
	x.dirty = nil
	x.vol = vol
	x.snap.Store(loaded.merge(vol, changes, x.blockSize))
	x.loaded.Store(true)
	return nil
}

// Update re-reads ids (those a change notice names): an id with a summary is
// inserted or replaced, an id without is removed (it left the listing).
func (x *searchIndex) Update(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	got, err := x.src.SummariesOf(ctx, ids)
	if err != nil {
		return fmt.Errorf("search: update %d events: %w", len(ids), err)
	}
	changes := make(map[string]*searchItem, len(ids))
	for _, id := range ids {
		changes[id] = nil
		if raw, ok := got[id]; ok {
			if it, ok := x.parseSummary(id, raw); ok {
				changes[id] = &it
			}
		}
		if x.dirty != nil {
			x.dirty[id] = struct{}{}
		}
	}
	x.snap.Store(x.snap.Load().merge(x.vol, changes, x.blockSize))
	return nil
}

// newSearchBlock lays out items. grams, when not nil, is a filter that
// already holds every pair of the items' titles.
func newSearchBlock(items []searchItem, grams *searchGrams) *searchBlock {
	size := 1
	for i := range items {
		size += 1 + len(items[i].lower)
	}
	b := &searchBlock{entries: make([]searchEntry, len(items)), starts: make([]int, len(items)+1), grams: grams}
	if grams == nil {
		b.grams = new(searchGrams)
		for i := range items {
			b.grams.add(items[i].lower)
		}
	}
	var text strings.Builder
	text.Grow(size)
	firsts := make([]byte, len(items))
	for i := range items {
		b.entries[i] = items[i].searchEntry
		b.starts[i] = text.Len()
		text.WriteByte(searchSep)
		text.WriteString(items[i].lower)
		firsts[i] = searchSep
		if items[i].lower != "" {
			firsts[i] = items[i].lower[0]
		}
	}
	b.starts[len(items)] = text.Len()
	text.WriteByte(searchSep)
	b.text, b.firsts = text.String(), string(firsts)
	return b
}

// title is entry i's lowered title.
func (b *searchBlock) title(i int) string { return b.text[b.starts[i]+1 : b.starts[i+1]] }

// titleAt returns the entry whose title holds text offset o, from entry i on.
func (b *searchBlock) titleAt(i, o int) int {
	return i + sort.Search(len(b.entries)-i, func(k int) bool { return b.starts[i+k+1] > o })
}

// locate returns the block that holds key or would take it (len(blocks) when
// key is after every entry), and key's position in that block.
func (s *searchSnapshot) locate(key *searchEntry) (bi, i int, found bool) {
	bi = sort.Search(len(s.blocks), func(k int) bool {
		es := s.blocks[k].entries
		return compareEntries(&es[len(es)-1], key) >= 0
	})
	if bi == len(s.blocks) {
		return bi, 0, false
	}
	i, found = slices.BinarySearchFunc(s.blocks[bi].entries, key, func(e searchEntry, k *searchEntry) int {
		return compareEntries(&e, k)
	})
	return bi, i, found
}

// find returns the entry of id, whose volume is v; nil when absent.
func (s *searchSnapshot) find(id string, v float64) *searchItem {
	bi, i, ok := s.locate(&searchEntry{id: id, volume: v})
	if !ok {
		return nil
	}
	b := s.blocks[bi]
	return &searchItem{b.entries[i], b.title(i)}
}

// blockChange is what a merge does to one block.
type blockChange struct {
	removed []int
	added   []searchItem
}

// merge returns a new snapshot: s without the changed ids, with the non-nil
// changes inserted in order. vol (id → volume of s's entries) is updated in
// place to match the result. s is not modified; the blocks no change touches
// are shared. size is the block size (searchBlockSize).
func (s *searchSnapshot) merge(vol map[string]float64, changes map[string]*searchItem, size int) *searchSnapshot {
	if len(changes) == 0 {
		return s
	}
	byBlock := map[int]*blockChange{}
	change := func(bi int) *blockChange {
		bi = min(bi, max(len(s.blocks)-1, 0)) // after the last entry: into the last block
		if byBlock[bi] == nil {
			byBlock[bi] = &blockChange{}
		}
		return byBlock[bi]
	}
	n := s.n
	for id, it := range changes {
		if v, ok := vol[id]; ok {
			if bi, i, found := s.locate(&searchEntry{id: id, volume: v}); found {
				c := change(bi)
				c.removed = append(c.removed, i)
				n--
			}
			delete(vol, id)
		}
		if it != nil {
			bi, _, _ := s.locate(&it.searchEntry)
			c := change(bi)
			c.added = append(c.added, *it)
			vol[id] = it.volume
			n++
		}
	}
	out := &searchSnapshot{blocks: make([]*searchBlock, 0, len(s.blocks)+1), n: n}
	if len(s.blocks) == 0 {
		if c := byBlock[0]; c != nil {
			slices.SortFunc(c.added, compareItems)
			out.appendBlocks(c.added, size, nil)
		}
		return out
	}
	// carry holds a shrunk block's items until they join the next block.
	var carry []searchItem
	var carryGrams *searchGrams
	for bi, b := range s.blocks {
		c := byBlock[bi]
		if c == nil && carry == nil {
			out.blocks = append(out.blocks, b)
			continue
		}
		items := b.mergeItems(carry, c)
		// The old filter with the added titles' pairs: a removed title's
		// pairs stay set, which costs a block read now and then until the
		// next Load, never a match.
		grams := new(searchGrams)
		*grams = *b.grams
		if carryGrams != nil {
			grams.or(carryGrams)
		}
		if c != nil {
			for i := range c.added {
				grams.add(c.added[i].lower)
			}
		}
		carry, carryGrams = nil, nil
		if len(items) < size/2 && bi+1 < len(s.blocks) {
			carry, carryGrams = items, grams
			continue
		}
		out.appendBlocks(items, size, grams)
	}
	return out
}

// mergeItems appends to dst the block's entries but the removed ones, with
// the added ones in order.
func (b *searchBlock) mergeItems(dst []searchItem, c *blockChange) []searchItem {
	if c == nil {
		c = &blockChange{}
	}
	slices.Sort(c.removed)
	slices.SortFunc(c.added, compareItems)
	dst = slices.Grow(dst, len(b.entries)+len(c.added)-len(c.removed))
	ri, ai := 0, 0
	for i := range b.entries {
		if ri < len(c.removed) && c.removed[ri] == i {
			ri++
			continue
		}
		old := searchItem{b.entries[i], b.title(i)}
		for ai < len(c.added) && compareItems(c.added[ai], old) < 0 {
			dst = append(dst, c.added[ai])
			ai++
		}
		dst = append(dst, old)
	}
	return append(dst, c.added[ai:]...)
}

// appendBlocks adds items as one block, or as blocks of about size when
// they are more than twice that; grams as in newSearchBlock.
func (s *searchSnapshot) appendBlocks(items []searchItem, size int, grams *searchGrams) {
	if len(items) == 0 {
		return
	}
	parts := 1
	if len(items) > 2*size {
		parts = len(items) / size
	}
	for p := range parts {
		s.blocks = append(s.blocks, newSearchBlock(items[p*len(items)/parts:(p+1)*len(items)/parts], grams))
	}
}

// Search answers up to limit raw summaries in contract order: titles
// starting with q first, then titles containing it elsewhere; within each
// group by volume desc, then id asc (bytewise). An empty q ranks every event
// by volume. q is literal text: '%', '_', '*', '.' and the like match
// themselves. The slices returned are shared: callers must not modify them.
//
// Matching is case-insensitive by lowering both title and q with
// strings.ToLower, which applies Unicode's simple one-to-one case mapping:
// "ÉLEC" finds "Élection"; but there is no full case folding, so "STRASSE"
// does not find "Straße", and a final sigma "ς" is not "σ". Both sides go
// through the same mapping, so what matches is consistent whatever the
// script. A q holding NUL matches nothing (no title holds one).
func (x *searchIndex) Search(q string, limit int) [][]byte {
	return x.searchIn(x.snap.Load(), q, limit)
}

// searchIn is Search on one snapshot.
func (x *searchIndex) searchIn(s *searchSnapshot, q string, limit int) [][]byte {
	lq := strings.ToLower(q)
	if limit <= 0 || strings.IndexByte(lq, searchSep) >= 0 {
		return [][]byte{}
	}
	out := make([][]byte, 0, min(limit, s.n))
	if q == "" {
		for _, b := range s.blocks {
			for i := range b.entries[:min(len(b.entries), limit-len(out))] {
				out = append(out, b.entries[i].raw)
			}
			if len(out) == limit {
				break
			}
		}
		return out
	}
	return s.search(out, lq, limit)
}

func (s *searchSnapshot) search(prefix [][]byte, lq string, limit int) [][]byte {
	var inside [][]byte
	grams := make([]uint32, 0, 16)
	for j := 1; j < len(lq) && len(grams) < cap(grams); j++ {
		grams = append(grams, gram(lq[j-1], lq[j]))
	}
	bi, i := 0, 0
	// Both groups: lq holds no separator, so each match lies in one title,
	// at its start (prefix group) or inside it; the next match that matters
	// is in a later title.
both:
	for ; bi < len(s.blocks); bi, i = bi+1, 0 {
		b := s.blocks[bi]
		if !b.mayHold(grams) {
			continue
		}
		for i < len(b.entries) {
			off := b.starts[i] + 1
			j := strings.Index(b.text[off:], lq)
			if j < 0 {
				break
			}
			o := off + j
			i = b.titleAt(i, o)
			if o == b.starts[i]+1 {
				prefix = append(prefix, b.entries[i].raw)
				if len(prefix) == limit {
					return prefix
				}
			} else {
				inside = append(inside, b.entries[i].raw)
			}
			i++
			if len(inside) == limit {
				break both
			}
		}
	}
	// The contains group is full: only titles starting with lq matter now.
	for ; bi < len(s.blocks); bi, i = bi+1, 0 {
		b := s.blocks[bi]
		if !b.mayHold(grams) {
			continue
		}
		for i < len(b.entries) {
			j := strings.IndexByte(b.firsts[i:], lq[0])
			if j < 0 {
				break
			}
			i += j
			if strings.HasPrefix(b.title(i), lq) {
				prefix = append(prefix, b.entries[i].raw)
				if len(prefix) == limit {
					return prefix
				}
			}
			i++
		}
	}
	return append(prefix, inside[:min(len(inside), limit-len(prefix))]...)
}

// Run resyncs the index with a full Load every period until ctx ends: the
// safety net for change notices lost on the way. It loads at once when the
// index has never loaded.
func (x *searchIndex) Run(ctx context.Context, every time.Duration) {
	if !x.Ready() {
		x.resync(ctx)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			x.resync(ctx)
		case <-x.reload:
			x.resync(ctx)
			t.Reset(every)
		}
	}
}

// Enqueue queues ids (a change notice's events) for RunUpdates. It never
// blocks: ids queued while an Update runs are re-read together by the next,
// so notices arriving faster than Redis answers cost one read, not one
// goroutine each.
func (x *searchIndex) Enqueue(ids []string) {
	x.pendingMu.Lock()
	for _, id := range ids {
		x.pending[id] = struct{}{}
	}
	x.pendingMu.Unlock()
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

// RunUpdates re-reads queued ids until ctx ends. An Update re-reads the
// current summaries, so ids queued twice need one read. An Update that
// fails (Redis unreachable) puts its ids back and the next try waits,
// doubling from searchRetryMin to searchRetryMax.
func (x *searchIndex) RunUpdates(ctx context.Context) {
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-x.kick:
		}
		x.pendingMu.Lock()
		ids := make([]string, 0, len(x.pending))
		for id := range x.pending {
			ids = append(ids, id)
		}
		clear(x.pending)
		x.pendingMu.Unlock()
		err := x.Update(ctx, ids)
		if err == nil || ctx.Err() != nil {
			wait = 0
			continue
		}
		wait = min(max(2*wait, searchRetryMin), searchRetryMax)
		x.log.Warn("search index update failed; retrying", "events", len(ids), "retry_in", wait.String(), "err", err)
		x.Enqueue(ids)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// The waits between failed search updates.
const (
	searchRetryMin = 100 * time.Millisecond
	searchRetryMax = 5 * time.Second
)

// RequestReload asks Run for a full Load as soon as it can (a flush
// notice: the cache was rebuilt). It never blocks; many requests before
// Run takes one make one Load.
func (x *searchIndex) RequestReload() {
	select {
	case x.reload <- struct{}{}:
	default:
	}
}

func (x *searchIndex) resync(ctx context.Context) {
	if err := x.Load(ctx); err != nil && ctx.Err() == nil {
		x.log.Warn("search index resync failed", "err", err)
	}
}

// searchMemo is one rendered search answer and the index snapshot it came
// from: valid while the index has not changed since.
type searchMemo struct {
	snap *searchSnapshot
	body []byte
}

// maxSearchMemos bounds the answers a node keeps; past it they are dropped.
const maxSearchMemos = 4096

// answer renders the search answer for q and limit, reusing the one
// rendered for the same query against the same snapshot: pollers repeat
// their queries, and the index changes only with listed events.
func (x *searchIndex) answer(q string, limit int, render func([][]byte) []byte) []byte {
	snap := x.snap.Load()
	key := strconv.Itoa(limit) + "\x00" + q
	if v, ok := x.memos.Load(key); ok && v.(*searchMemo).snap == snap {
		return v.(*searchMemo).body
	}
	body := render(x.searchIn(snap, q, limit))
	if x.memoCount.Add(1) > maxSearchMemos {
		x.memos.Clear()
		x.memoCount.Store(0)
	}
	x.memos.Store(key, &searchMemo{snap: snap, body: body})
	return body
}

package search

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/marketdata/marketdata/store"
)

// defaultBlockSize is the size of blocks a Load cuts; an Update splits a
// block grown past twice that and joins one shrunk below half of it to the
// next. A block's text is then about 10 KB: long enough for vectorised
// search, short enough to rebuild in microseconds.
const defaultBlockSize = 256

// sep precedes every title in a block's text. Ingest refuses titles
// with NUL; the index replaces any in a cached title all the same, so that a
// match never runs from one title into the next.
const sep = '\x00'

// snapshot is one immutable state of the index: its blocks in order,
// each non-empty. Entries are sorted by volume desc, then id asc (bytewise):
// the order of each answer group, so a search walks forward once and never
// sorts.
type snapshot struct {
	blocks []*block
	n      int
}

// block lays its lowered titles end to end in one string, so that a
// search is a few strings.Index calls over contiguous memory (vectorised)
// instead of a call per title.
type block struct {
	entries []entry
	// text is sep + title 0 + sep + title 1 ... + sep.
	text string
	// starts[i] is the offset in text of the separator before title i;
	// starts[len(entries)] is the final separator's, so title i is
	// text[starts[i]+1 : starts[i+1]].
	starts []int
	// firsts[i] is the first byte of title i (sep when empty).
	firsts string
	// grams has the bit of every byte pair in the block's titles set (and
	// maybe more: see merge): a query with a pair whose bit is clear matches
	// nowhere in the block, so a search that would find nothing skips most
	// blocks unread.
	grams *pairFilter
}

// pairFilter is a block's pair filter: 1 KB, for about 1,000 distinct
// pairs in 256 titles.
type pairFilter [8192 / 64]uint64

// add sets the bits of the pairs of t.
func (g *pairFilter) add(t string) {
	for j := 1; j < len(t); j++ {
		k := gram(t[j-1], t[j])
		g[k/64] |= 1 << (k % 64)
	}
}

// or sets the bits set in o.
func (g *pairFilter) or(o *pairFilter) {
	for i := range g {
		g[i] |= o[i]
	}
}

// gram is the filter bit of the byte pair a, b.
func gram(a, b byte) uint32 {
	return (uint32(a)<<8 | uint32(b)) * 0x9E3779B1 >> (32 - 13)
}

// mayHold reports whether every pair of q's may be in the block.
func (b *block) mayHold(grams []uint32) bool {
	for _, g := range grams {
		if b.grams[g/64]&(1<<(g%64)) == 0 {
			return false
		}
	}
	return true
}

type entry struct {
	id     string
	volume float64
	// raw is the summary as cached, answered untouched.
	raw []byte
	// links is what the match filters ask of the event's venue links.
	links store.Links
}

// item is an entry with its lowered title, on its way into a block.
type item struct {
	entry
	lower string
}

// compareEntries orders entries as answers list them.
func compareEntries(a, b *entry) int {
	if c := cmp.Compare(b.volume, a.volume); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

func compareItems(a, b item) int { return compareEntries(&a.entry, &b.entry) }

// newBlock lays out items. grams, when not nil, is a filter that
// already holds every pair of the items' titles.
func newBlock(items []item, grams *pairFilter) *block {
	size := 1
	for i := range items {
		size += 1 + len(items[i].lower)
	}
	b := &block{entries: make([]entry, len(items)), starts: make([]int, len(items)+1), grams: grams}
	if grams == nil {
		b.grams = new(pairFilter)
		for i := range items {
			b.grams.add(items[i].lower)
		}
	}
	var text strings.Builder
	text.Grow(size)
	firsts := make([]byte, len(items))
	for i := range items {
		b.entries[i] = items[i].entry
		b.starts[i] = text.Len()
		text.WriteByte(sep)
		text.WriteString(items[i].lower)
		firsts[i] = sep
		if items[i].lower != "" {
			firsts[i] = items[i].lower[0]
		}
	}
	b.starts[len(items)] = text.Len()
	text.WriteByte(sep)
	b.text, b.firsts = text.String(), string(firsts)
	return b
}

// title is entry i's lowered title.
func (b *block) title(i int) string { return b.text[b.starts[i]+1 : b.starts[i+1]] }

// titleAt returns the entry whose title holds text offset o, from entry i on.
func (b *block) titleAt(i, o int) int {
	return i + sort.Search(len(b.entries)-i, func(k int) bool { return b.starts[i+k+1] > o })
}

// locate returns the block that holds key or would take it (len(blocks) when
// key is after every entry), and key's position in that block.
func (s *snapshot) locate(key *entry) (bi, i int, found bool) {
	bi = sort.Search(len(s.blocks), func(k int) bool {
		es := s.blocks[k].entries
		return compareEntries(&es[len(es)-1], key) >= 0
	})
	if bi == len(s.blocks) {
		return bi, 0, false
	}
	i, found = slices.BinarySearchFunc(s.blocks[bi].entries, key, func(e entry, k *entry) int {
		return compareEntries(&e, k)
	})
	return bi, i, found
}

// find returns the entry of id, whose volume is v; nil when absent.
func (s *snapshot) find(id string, v float64) *item {
	bi, i, ok := s.locate(&entry{id: id, volume: v})
	if !ok {
		return nil
	}
	b := s.blocks[bi]
	return &item{b.entries[i], b.title(i)}
}

// blockChange is what a merge does to one block.
type blockChange struct {
	removed []int
	added   []item
}

// merge returns a new snapshot: s without the changed ids, with the non-nil
// changes inserted in order. vol (id → volume of s's entries) is updated in
// place to match the result. s is not modified; the blocks no change touches
// are shared. size is the block size (defaultBlockSize).
func (s *snapshot) merge(vol map[string]float64, changes map[string]*item, size int) *snapshot {
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
			if bi, i, found := s.locate(&entry{id: id, volume: v}); found {
				c := change(bi)
				c.removed = append(c.removed, i)
				n--
			}
			delete(vol, id)
		}
		if it != nil {
			bi, _, _ := s.locate(&it.entry)
			c := change(bi)
			c.added = append(c.added, *it)
			vol[id] = it.volume
			n++
		}
	}
	out := &snapshot{blocks: make([]*block, 0, len(s.blocks)+1), n: n}
	if len(s.blocks) == 0 {
		if c := byBlock[0]; c != nil {
			slices.SortFunc(c.added, compareItems)
			out.appendBlocks(c.added, size, nil)
		}
		return out
	}
	// carry holds a shrunk block's items until they join the next block.
	var carry []item
	var carryGrams *pairFilter
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
		grams := new(pairFilter)
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
func (b *block) mergeItems(dst []item, c *blockChange) []item {
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
		old := item{b.entries[i], b.title(i)}
		for ai < len(c.added) && compareItems(c.added[ai], old) < 0 {
			dst = append(dst, c.added[ai])
			ai++
		}
		dst = append(dst, old)
	}
	return append(dst, c.added[ai:]...)
}

// appendBlocks adds items as one block, or as blocks of about size when
// they are more than twice that; grams as in newBlock.
func (s *snapshot) appendBlocks(items []item, size int, grams *pairFilter) {
	if len(items) == 0 {
		return
	}
	parts := 1
	if len(items) > 2*size {
		parts = len(items) / size
	}
	for p := range parts {
		s.blocks = append(s.blocks, newBlock(items[p*len(items)/parts:(p+1)*len(items)/parts], grams))
	}
}

package search

import (
	"strings"
)

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
func (x *Index) Search(q string, limit int) [][]byte {
	return x.searchIn(x.snap.Load(), q, limit, Filter{})
}

// SearchFiltered is Search keeping only the events f keeps: the answer is
// Search's over those events alone.
func (x *Index) SearchFiltered(q string, limit int, f Filter) [][]byte {
	return x.searchIn(x.snap.Load(), q, limit, f)
}

// searchIn is SearchFiltered on one snapshot.
func (x *Index) searchIn(s *snapshot, q string, limit int, f Filter) [][]byte {
	lq := strings.ToLower(q)
	if limit <= 0 || strings.IndexByte(lq, sep) >= 0 {
		return [][]byte{}
	}
	out := make([][]byte, 0, min(limit, s.n))
	switch {
	case q == "" && !f.Active():
		for _, b := range s.blocks {
			for i := range b.entries[:min(len(b.entries), limit-len(out))] {
				out = append(out, b.entries[i].raw)
			}
			if len(out) == limit {
				break
			}
		}
		return out
	case q == "":
		for _, b := range s.blocks {
			for i := range b.entries {
				if keeps(f, &b.entries[i]) {
					if out = append(out, b.entries[i].raw); len(out) == limit {
						return out
					}
				}
			}
		}
		return out
	}
	return s.search(out, lq, limit, f)
}

// search answers a non-empty lq; with an active f, the entries it does not
// keep are passed over as if their titles did not match.
func (s *snapshot) search(prefix [][]byte, lq string, limit int, f Filter) [][]byte {
	filtered := f.Active()
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
			if filtered && !keeps(f, &b.entries[i]) {
				i++
				continue
			}
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
			if strings.HasPrefix(b.title(i), lq) && (!filtered || keeps(f, &b.entries[i])) {
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

package search

import (
	"strconv"
)

// memo is one rendered search answer and the index snapshot it came from:
// valid while the index has not changed since.
type memo struct {
	snap *snapshot
	body []byte
	tag  string
}

// maxMemos bounds the answers a node keeps; past it they are dropped.
const maxMemos = 4096

// Answer renders the search answer for q, limit and f (render gives the
// body and its ETag), reusing the one rendered for the same query against
// the same snapshot: pollers repeat their queries, and the index changes
// only with listed events. The memo's key holds the whole query, the
// filter included: an answer for one filter never answers another.
func (x *Index) Answer(q string, limit int, f Filter, render func([][]byte) (body []byte, tag string)) (body []byte, tag string) {
	snap := x.snap.Load()
	// Neither the limit nor the filter's key holds a NUL: the key splits
	// one way only.
	key := strconv.Itoa(limit) + "\x00" + filterKey(f) + "\x00" + q
	if v, ok := x.memos.Load(key); ok && v.(*memo).snap == snap {
		m := v.(*memo)
		return m.body, m.tag
	}
	body, tag = render(x.searchIn(snap, q, limit, f))
	if x.memoCount.Add(1) > maxMemos {
		x.memos.Clear()
		x.memoCount.Store(0)
	}
	x.memos.Store(key, &memo{snap: snap, body: body, tag: tag})
	return body, tag
}

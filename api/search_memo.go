package api

import (
	"strconv"
)

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

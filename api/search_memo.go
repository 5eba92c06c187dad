package api

import (
	"strconv"
)

// searchMemo is one rendered search answer and the index snapshot it came
// from: valid while the index has not changed since.
type searchMemo struct {
	snap *searchSnapshot
	body []byte
	tag  string // bodyTag(body)
}

// maxSearchMemos bounds the answers a node keeps; past it they are dropped.
const maxSearchMemos = 4096

// answer renders the search answer for q and limit, reusing the one
// rendered for the same query against the same snapshot: pollers repeat
// their queries, and the index changes only with listed events.
func (x *searchIndex) answer(q string, limit int, render func([][]byte) []byte) (body []byte, tag string) {
	snap := x.snap.Load()
	key := strconv.Itoa(limit) + "\x00" + q
	if v, ok := x.memos.Load(key); ok && v.(*searchMemo).snap == snap {
		m := v.(*searchMemo)
		return m.body, m.tag
	}
	body = render(x.searchIn(snap, q, limit))
	tag = bodyTag(body)
	if x.memoCount.Add(1) > maxSearchMemos {
		x.memos.Clear()
		x.memoCount.Store(0)
	}
	x.memos.Store(key, &searchMemo{snap: snap, body: body, tag: tag})
	return body, tag
}

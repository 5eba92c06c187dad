package api

import (
	"slices"
	"testing"
	"time"
)

// TestPageCache: a page is served from the node until the TTL; a drop
// forgets exactly the pages whose id range holds a dropped id (a full page
// covers (after, last], a short one everything above after); a read that
// began before a drop does not store its page.
func TestPageCache(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPageCache(2*time.Second, 100, 1<<20, func() time.Time { return now })
	first := pageKey{set: "*:*:1", after: "", count: 3}
	middle := pageKey{set: "*:*:1", after: "c", count: 3}
	last := pageKey{set: "*:*:1", after: "g", count: 3} // a short page: the set's end
	other := pageKey{set: "politics:*:1", after: "", count: 3}
	fill := func() {
		t.Helper()
		for k, ids := range map[pageKey][]string{first: {"a", "b", "c"}, middle: {"d", "e", "f"}, last: {"h"}, other: {"b"}} {
			_, _, ok, epoch := p.lookup(k)
			if ok {
				continue
			}
			sums := make([][]byte, len(ids))
			for i, id := range ids {
				sums[i] = []byte(`{"universal_id":"` + id + `"}`)
			}
			p.store(k, ids, sums, epoch, now)
		}
	}
	held := func() (out []string) {
		for _, k := range []pageKey{first, middle, last, other} {
			if _, _, ok, _ := p.lookup(k); ok {
				out = append(out, k.set+"/"+k.after)
			}
		}
		return out
	}
	fill()
	if got := held(); len(got) != 4 {
		t.Fatalf("after storing 4 pages: held %q", got)
	}
	ids, sums, ok, _ := p.lookup(middle)
	if !ok || !slices.Equal(ids, []string{"d", "e", "f"}) || string(sums[2]) != `{"universal_id":"f"}` {
		t.Fatalf("middle page: %q %q %v", ids, sums, ok)
	}

	for _, tc := range []struct {
		drop []string
		want []string
	}{
		// other is short (the set's end): it covers every id above "".
		{[]string{"e"}, []string{"*:*:1/", "*:*:1/g"}},            // inside middle
		{[]string{"c"}, []string{"*:*:1/c", "*:*:1/g"}},           // first's last id
		{[]string{"0", "zz"}, []string{"*:*:1/c"}},                // 0 in first; zz above middle's f, in last
		{[]string{"g"}, []string{"*:*:1/", "*:*:1/c", "*:*:1/g"}}, // the page after g does not hold g
		{[]string{"fa", "ga"}, []string{"*:*:1/", "*:*:1/c"}},     // fa above f; ga in the short last page
		{[]string{"ca"}, []string{"*:*:1/", "*:*:1/g"}},           // between c and d: middle's range
		{nil, []string{"*:*:1/", "*:*:1/c", "*:*:1/g", "politics:*:1/"}},
	} {
		p.flush()
		fill()
		p.drop(tc.drop)
		if got := held(); !slices.Equal(got, tc.want) {
			t.Errorf("drop %q: held %q, want %q", tc.drop, got, tc.want)
		}
	}

	// A read that began before a drop does not store its page.
	p.flush()
	_, _, _, epoch := p.lookup(first)
	p.drop([]string{"zzz"})
	p.store(first, []string{"a"}, [][]byte{[]byte("{}")}, epoch, now)
	if _, _, ok, _ := p.lookup(first); ok {
		t.Error("a page read before a drop was stored")
	}

	// The TTL.
	fill()
	now = now.Add(2 * time.Second)
	if got := held(); len(got) != 0 {
		t.Errorf("after the TTL: held %q, want none", got)
	}
}

// TestPageCacheBounds: past its page count or byte budget the cache forgets
// expired pages first, then others at random until the new one fits. A page
// bigger than a quarter of the budget is not kept.
func TestPageCacheBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPageCache(2*time.Second, 3, 4000, func() time.Time { return now })
	page := func(after string, sumLen int) {
		t.Helper()
		k := pageKey{set: "s", after: after, count: 2}
		_, _, _, epoch := p.lookup(k)
		p.store(k, []string{after + "1"}, [][]byte{make([]byte, sumLen)}, epoch, now)
	}
	held := func(afters ...string) (n int) {
		for _, a := range afters {
			if _, _, ok, _ := p.lookup(pageKey{set: "s", after: a, count: 2}); ok {
				n++
			}
		}
		return n
	}
	page("a", 10)
	page("b", 10)
	now = now.Add(1500 * time.Millisecond)
	page("c", 10) // a and b expire before c
	now = now.Add(600 * time.Millisecond)
	page("d", 10) // 3 pages held: a and b (expired) go, c stays
	if held("a", "b") != 0 || held("c", "d") != 2 {
		t.Errorf("past 3 pages: %d of a, b and %d of c, d held; want only c and d", held("a", "b"), held("c", "d"))
	}
	page("e", 10)
	page("f", 10) // c, d, e fresh: one of them goes
	if held("c", "d", "e") != 2 || held("f") != 1 || len(p.pages) != 3 {
		t.Errorf("past 3 fresh pages: %d of c, d, e and %d of f held; want 2 and 1", held("c", "d", "e"), held("f"))
	}

	p.flush()
	page("g", 900)
	page("h", 900)
	page("i", 900)
	page("j", 900) // 4 × 902 bytes > 4000: one of g, h, i goes
	if held("g", "h", "i") != 2 || held("j") != 1 || p.bytes != 3*902 {
		t.Errorf("past the byte budget: %d of g, h, i and %d of j held, %d bytes; want 2, 1 and %d bytes",
			held("g", "h", "i"), held("j"), p.bytes, 3*902)
	}
	page("k", 1000) // over a quarter of the budget
	if held("k") != 0 {
		t.Error("a page over a quarter of the budget was kept")
	}
	// Each of these pages is short (the end of its set): an id above all
	// of them is in every one's range.
	p.drop([]string{"j0"})
	if n := held("g", "h", "i", "j"); n != 0 || p.bytes != 0 || len(p.pages) != 0 {
		t.Errorf("after dropping an id above every page: %d held, %d bytes; want none, 0", n, p.bytes)
	}
}

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
	p := newPageCache(2*time.Second, 100, func() time.Time { return now })
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

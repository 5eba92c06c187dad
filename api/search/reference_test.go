package search

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// searchReference is the contract's whole answer (no limit), computed the
// slow, obvious way.
func searchReference(meta map[string]searchMeta, q string) []string {
	return filterReference(meta, rankReference(meta), q)
}

// rankReference lists the ids by volume desc, then id asc.
func rankReference(meta map[string]searchMeta) []string {
	return slices.SortedFunc(maps.Keys(meta), func(a, b string) int {
		if c := cmp.Compare(meta[b].volume, meta[a].volume); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
}

// keepsReference is the contract's match filter on one event: with a
// least confidence above 0 or a relation, every venue link must have
// metadata that is sure enough and of that relation. An event with no link
// at all passes no such filter (a served event has two).
func keepsReference(m searchMeta, f Filter) bool {
	if f.MinConfidence == 0 && f.Relation == "" {
		return true
	}
	n := 0
	for i, present := range m.links.present {
		if !present {
			continue
		}
		n++
		lm := m.links.matches[i]
		if lm == nil || lm.confidence < f.MinConfidence || (f.Relation != "" && lm.relation != f.Relation) {
			return false
		}
	}
	return n > 0
}

// filterReference answers q from ranked ids: prefix matches, then the others.
func filterReference(meta map[string]searchMeta, ranked []string, q string) []string {
	return filteredReference(meta, ranked, q, Filter{})
}

// filteredReference is filterReference over the events f keeps.
func filteredReference(meta map[string]searchMeta, ranked []string, q string, f Filter) []string {
	var pre, in []string
	lq := strings.ToLower(q)
	for _, id := range ranked {
		if !keepsReference(meta[id], f) {
			continue
		}
		lt := strings.ToLower(meta[id].title)
		switch {
		case strings.HasPrefix(lt, lq):
			pre = append(pre, id)
		case strings.Contains(lt, lq):
			in = append(in, id)
		}
	}
	return append(pre, in...)
}

// checkSearchIndex checks the snapshot's invariants: blocks non-empty and
// within bounds, entries in order, titles laid out as the offsets say, and
// the writers' volume map in step.
func checkSearchIndex(t *testing.T, x *Index) {
	t.Helper()
	s := x.snap.Load()
	n := 0
	var prev *entry
	for bi, b := range s.blocks {
		if len(b.entries) == 0 || (len(s.blocks) > 1 && len(b.entries) > 2*x.blockSize+1) {
			t.Fatalf("block %d of %d has %d entries (block size %d)", bi, len(s.blocks), len(b.entries), x.blockSize)
		}
		if len(b.starts) != len(b.entries)+1 || len(b.firsts) != len(b.entries) || b.starts[0] != 0 ||
			b.starts[len(b.entries)] != len(b.text)-1 {
			t.Fatalf("block %d: layout of %d entries: %d starts, %d firsts, text %d bytes", bi, len(b.entries), len(b.starts), len(b.firsts), len(b.text))
		}
		for i := range b.entries {
			e := &b.entries[i]
			if prev != nil && compareEntries(prev, e) >= 0 {
				t.Fatalf("block %d entry %d (%s) not after %s", bi, i, e.id, prev.id)
			}
			prev = e
			if b.text[b.starts[i]] != sep {
				t.Fatalf("block %d entry %d: no separator", bi, i)
			}
			var s struct {
				Title string `json:"title"`
			}
			if err := json.Unmarshal(e.raw, &s); err != nil {
				t.Fatal(err)
			}
			if got, want := b.title(i), strings.ToLower(s.Title); got != want {
				t.Fatalf("block %d entry %d: title %q, want %q", bi, i, got, want)
			}
			if want := cmp.Or(b.title(i), string(sep))[0]; b.firsts[i] != want {
				t.Fatalf("block %d entry %d: first byte %q, want %q", bi, i, b.firsts[i], want)
			}
			if tt := b.title(i); len(tt) > 1 && !b.mayHold(titleGrams(tt)) {
				t.Fatalf("block %d entry %d: pair filter misses a pair of %q", bi, i, tt)
			}
			if v, ok := x.vol[e.id]; !ok || v != e.volume {
				t.Fatalf("vol[%s] = %v, %v; want %v", e.id, v, ok, e.volume)
			}
		}
		n += len(b.entries)
	}
	if n != s.n || n != len(x.vol) {
		t.Fatalf("%d entries, n %d, %d volumes", n, s.n, len(x.vol))
	}
}

// titleGrams lists the pair filter bits of s.
func titleGrams(s string) []uint32 {
	var out []uint32
	for j := 1; j < len(s); j++ {
		out = append(out, gram(s[j-1], s[j]))
	}
	return out
}

// Random titles and updates, against the reference after every step, with
// blocks small enough to split and join.
func TestSearchMatchesReference(t *testing.T) {
	for _, size := range []int{1, 3, 8, defaultBlockSize} {
		t.Run(fmt.Sprintf("block %d", size), func(t *testing.T) {
			testSearchMatchesReference(t, size)
		})
	}
}

func testSearchMatchesReference(t *testing.T, size int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, uint64(size)))
	words := []string{"ab", "AB", "ba", "b", "a.b", "a_b", "Ä", "ä", "x%"}
	title := func() string {
		n := rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(parts, " ")
	}
	id := func() string { return fmt.Sprintf("%c%d", "aAbB"[rng.IntN(4)], rng.IntN(60)) }
	src := newFakeSummaries()
	// Links: venue ids on a random set of venues, each with metadata (or
	// none) drawn from a few relations and confidences, ties included.
	put := func(id string) {
		var l refLinks
		for i := range l.present {
			l.present[i] = rng.IntN(3) > 0
			if l.present[i] && rng.IntN(4) > 0 {
				l.matches[i] = &refMatch{[]string{"identity", "identity", "complement", "subset"}[rng.IntN(4)],
					[]float64{0, 0.3, 0.5, 0.5, 0.9, 1}[rng.IntN(6)]}
			}
		}
		src.putLinked(id, title(), float64(rng.IntN(5)), l)
	}
	for range 80 {
		put(id())
	}
	x := loadedIndexSized(t, src, size)
	queries := []string{"", "a", "A", "ab", "b", "a.b", ".", "_", "ä", "Ä", "x%", "%", "ab ab", " ", "b a"}
	for step := range 400 {
		// Growth then shrinkage, so blocks both split and join.
		ids := make([]string, rng.IntN(8))
		for i := range ids {
			ids[i] = id()
			if (step < 200 && rng.IntN(4) == 0) || (step >= 200 && rng.IntN(4) != 0) {
				src.remove(ids[i])
			} else {
				put(ids[i])
			}
		}
		if step%100 == 99 {
			if err := x.Load(ctx); err != nil {
				t.Fatal(err)
			}
		} else if err := x.Update(ctx, ids); err != nil {
			t.Fatal(err)
		}
		checkSearchIndex(t, x)
		if x.Len() != len(src.m) {
			t.Fatalf("step %d: len %d, want %d", step, x.Len(), len(src.m))
		}
		ranked := rankReference(src.meta)
		for _, q := range queries {
			for _, f := range referenceFilters {
				if f.Active() && step%10 != 0 {
					continue // the filters every tenth step: the search itself every step
				}
				all := filteredReference(src.meta, ranked, q, f)
				for _, limit := range []int{1, 3, 20, 50} {
					got, want := x.SearchFiltered(q, limit, f), all[:min(len(all), limit)]
					if !f.Active() {
						got = x.Search(q, limit)
					}
					same := len(got) == len(want)
					for k := 0; same && k < len(got); k++ {
						same = bytes.Equal(got[k], src.m[want[k]])
					}
					if !same {
						t.Fatalf("step %d, q %q, limit %d, filter %+v:\n got %q\nwant %q", step, q, limit, f, searchIDs(t, got), want)
					}
				}
			}
		}
	}
}

// referenceFilters are the match filters the reference test tries.
var referenceFilters = []Filter{
	{}, {MinConfidence: 0.5}, {Relation: "identity"}, {MinConfidence: 0.9, Relation: "identity"},
	{MinConfidence: 1}, {MinConfidence: 0.3, Relation: "complement"}, {MinConfidence: 5e-324},
}

// Searches run while updates and loads replace the snapshot (run with -race).
func TestSearchConcurrentWithUpdates(t *testing.T) {
	ctx := context.Background()
	src := newFakeSummaries()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		src.put(fmt.Sprintf("ev-%d", i), fmt.Sprintf("Event %d cup", i), float64(rng.IntN(100)))
	}
	x := loadedIndex(t, src)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				q := []string{"", "event 1", "cup", "7 cup", "zz"}[(n+r)%5]
				got := x.Search(q, 20)
				// Every answer is in order: volume never rises within a group.
				var prev struct {
					Title  string  `json:"title"`
					Volume float64 `json:"volume"`
				}
				prevPrefix := true
				for i, raw := range got {
					var s struct {
						Title  string  `json:"title"`
						Volume float64 `json:"volume"`
					}
					if err := json.Unmarshal(raw, &s); err != nil {
						errs <- err
						return
					}
					isPrefix := strings.HasPrefix(strings.ToLower(s.Title), q)
					if i > 0 && ((isPrefix && !prevPrefix) || (isPrefix == prevPrefix && s.Volume > prev.Volume)) {
						errs <- fmt.Errorf("q %q: answer out of order at %d: %s after %v", q, i, raw, prev)
						return
					}
					prev, prevPrefix = s, isPrefix
				}
			}
		})
	}
	for i := range 300 {
		var ids []string
		for range 10 {
			id := fmt.Sprintf("ev-%d", rng.IntN(2200))
			if rng.IntN(4) == 0 {
				src.remove(id)
			} else {
				src.put(id, fmt.Sprintf("Event %s cup", id), float64(rng.IntN(100)))
			}
			ids = append(ids, id)
		}
		if err := x.Update(ctx, ids); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			wg.Go(func() {
				if err := x.Load(ctx); err != nil {
					errs <- err
				}
			})
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkSearchIndex(t, x)
	if got, want := searchIDs(t, x.Search("cup", 50)), searchReference(src.meta, "cup")[:50]; !slices.Equal(got, want) {
		t.Errorf("final state:\n got %q\nwant %q", got, want)
	}
}

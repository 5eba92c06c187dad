package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// fakeSummaries is a summarySource over a map, as P{i}:s would hold it.
type fakeSummaries struct {
	mu sync.Mutex
	m  map[string][]byte
	// meta holds what m's summaries say, for the reference answer.
	meta map[string]searchMeta
	// afterRead, when set, runs after Summaries has copied the map and
	// before it returns (to change the source under a Load).
	afterRead func()
	// loads counts the calls of Summaries (full Loads), ofCalls those of
	// SummariesOf (Updates); beforeOf, when set, runs at the start of
	// SummariesOf (to hold an Update up).
	loads, ofCalls int
	beforeOf       func()
	// failOf fails that many SummariesOf calls (Redis unreachable).
	failOf int
}

type searchMeta struct {
	title  string
	volume float64
}

func newFakeSummaries() *fakeSummaries {
	return &fakeSummaries{m: map[string][]byte{}, meta: map[string]searchMeta{}}
}

func (f *fakeSummaries) put(id, title string, volume float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[id] = searchSummary(id, title, volume)
	f.meta[id] = searchMeta{title, volume}
}

func (f *fakeSummaries) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, id)
	delete(f.meta, id)
}

func (f *fakeSummaries) Summaries(context.Context) (map[string][]byte, error) {
	f.mu.Lock()
	f.loads++
	out := make(map[string][]byte, len(f.m))
	for id, s := range f.m {
		out[id] = s
	}
	hook := f.afterRead
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return out, nil
}

func (f *fakeSummaries) loadCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loads
}

func (f *fakeSummaries) SummariesOf(_ context.Context, ids []string) (map[string][]byte, error) {
	f.mu.Lock()
	f.ofCalls++
	hook := f.beforeOf
	fail := f.failOf > 0
	if fail {
		f.failOf--
	}
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if fail {
		return nil, errors.New("redis: connection refused")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]byte{}
	for _, id := range ids {
		if s, ok := f.m[id]; ok {
			out[id] = s
		}
	}
	return out, nil
}

// searchSummary renders a summary with the fields search reads (and one it
// does not, to show the bytes are answered untouched).
func searchSummary(id, title string, volume float64) []byte {
	b, err := json.Marshal(map[string]any{"universal_id": id, "title": title, "volume": volume, "status": "active"})
	if err != nil {
		panic(err)
	}
	return b
}

// searchIDs reads the universal ids of an answer.
func searchIDs(t testing.TB, got [][]byte) []string {
	t.Helper()
	ids := make([]string, len(got))
	for i, raw := range got {
		var s struct {
			UniversalID string `json:"universal_id"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("answer %d: %v: %s", i, err, raw)
		}
		ids[i] = s.UniversalID
	}
	return ids
}

func loadedIndex(t testing.TB, src summarySource) *searchIndex {
	t.Helper()
	return loadedIndexSized(t, src, searchBlockSize)
}

// loadedIndexSized loads an index cutting blocks of size (small sizes make
// Updates split and join blocks).
func loadedIndexSized(t testing.TB, src summarySource, size int) *searchIndex {
	t.Helper()
	x := newSearchIndex(src)
	x.blockSize = size
	if x.Ready() {
		t.Fatal("ready before the first load")
	}
	if err := x.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !x.Ready() {
		t.Fatal("not ready after a load")
	}
	return x
}

type searchCase struct {
	q     string
	limit int
	want  []string
}

func checkSearches(t *testing.T, x *searchIndex, tests []searchCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q limit %d", tt.q, tt.limit), func(t *testing.T) {
			got := searchIDs(t, x.Search(tt.q, tt.limit))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSearchRanking(t *testing.T) {
	src := newFakeSummaries()
	// Ties at volume 10 among ids "B" < "a" < "aa" < "d" bytewise (a
	// case-insensitive or locale collation would put "B" after "a").
	src.put("a", "Election 2024", 10)
	src.put("B", "Election night", 10)
	src.put("aa", "election", 10)
	src.put("f", "ELECTION results", 20)
	src.put("c", "US election", 50)
	src.put("d", "Presidential Election", 10)
	src.put("0", "Re-election bid", 10)
	src.put("h", "Sports final", 1000)
	src.put("e", "Elect a mayor", 500)
	x := loadedIndex(t, src)
	if x.Len() != 9 {
		t.Fatalf("len %d, want 9", x.Len())
	}
	all := []string{"f", "B", "a", "aa", "c", "0", "d"}
	checkSearches(t, x, []searchCase{
		{"election", 20, all},
		{"election", 7, all},
		{"election", 5, all[:5]},
		{"election", 4, all[:4]},
		{"election", 3, all[:3]},
		{"election", 1, all[:1]},
		{"election", 0, []string{}},
		{"elect", 20, []string{"e", "f", "B", "a", "aa", "c", "0", "d"}},
		// The prefix group comes first even with a lower volume.
		{"sports", 20, []string{"h"}},
		{"final", 20, []string{"h"}},
		{"us ", 20, []string{"c"}},
		{"nothing like it", 20, []string{}},
		{"election 2024 and more", 20, []string{}},
	})
}

func TestSearchEmptyQuery(t *testing.T) {
	src := newFakeSummaries()
	src.put("a", "One", 5)
	src.put("B", "Two", 5)
	src.put("aa", "Three", 5)
	src.put("z", "Four", 7.5)
	src.put("y", "Five", 0)
	x := loadedIndex(t, src)
	checkSearches(t, x, []searchCase{
		{"", 20, []string{"z", "B", "a", "aa", "y"}},
		{"", 2, []string{"z", "B"}},
		{"", 1, []string{"z"}},
	})
	if got := newSearchIndex(src).Search("", 20); got == nil || len(got) != 0 {
		t.Errorf("unloaded index: got %q, want an empty answer", got)
	}
}

func TestSearchLiteral(t *testing.T) {
	src := newFakeSummaries()
	src.put("pct", "100% sure", 9)
	src.put("nopct", "1000 sure", 8)
	src.put("under", "a_b market", 7)
	src.put("nounder", "axb market", 6)
	src.put("dotstar", "x.*y rule", 5)
	src.put("nodot", "xaay rule", 4)
	src.put("regex", "Price [up] (or) down? ^$ | \\d+", 3)
	// Ingest refuses NUL in titles; one in the cache matches as U+FFFD.
	src.put("nul", "q\x00j", 2)
	src.put("qj", "qj", 1)
	x := loadedIndex(t, src)
	checkSearches(t, x, []searchCase{
		{"%", 20, []string{"pct"}},
		{"100%", 20, []string{"pct"}},
		{"0%", 20, []string{"pct"}},
		{"_", 20, []string{"under"}},
		{"a_b", 20, []string{"under"}},
		{"a_", 20, []string{"under"}},
		{".*", 20, []string{"dotstar"}},
		{"x.*y", 20, []string{"dotstar"}},
		{".", 20, []string{"dotstar"}},
		{"*", 20, []string{"dotstar"}},
		{"x.", 20, []string{"dotstar"}},
		{"[up]", 20, []string{"regex"}},
		{"(or)", 20, []string{"regex"}},
		{"?", 20, []string{"regex"}},
		{"^$", 20, []string{"regex"}},
		{"\\d+", 20, []string{"regex"}},
		{"[", 20, []string{"regex"}},
		{"\\", 20, []string{"regex"}},
		{"%%", 20, []string{}},
		{"a.b", 20, []string{}},
		{"q", 20, []string{"nul", "qj"}},
		{"j", 20, []string{"nul", "qj"}},
		{"\uFFFDj", 20, []string{"nul"}},
		{"\x00", 20, []string{}},
		{"q\x00j", 20, []string{}},
		// A match never runs from one title into the next.
		{"jq", 20, []string{}},
		{"j\x00q", 20, []string{}},
	})
}

func TestSearchCaseInsensitive(t *testing.T) {
	src := newFakeSummaries()
	src.put("e1", "Élection présidentielle", 3)
	src.put("e2", "ÉLECTION LÉGISLATIVE", 2)
	src.put("e3", "Une élection", 1)
	src.put("m", "MiXeD CaSe Title", 1)
	src.put("g", "ΣΕΛΗΝΗ landing", 1)
	src.put("s", "Straße closed", 1)
	x := loadedIndex(t, src)
	checkSearches(t, x, []searchCase{
		{"élec", 20, []string{"e1", "e2", "e3"}},
		{"ÉLEC", 20, []string{"e1", "e2", "e3"}},
		{"Élection", 20, []string{"e1", "e2", "e3"}},
		{"élection PRÉS", 20, []string{"e1"}},
		{"législative", 20, []string{"e2"}},
		// Unaccented letters are other letters.
		{"elec", 20, []string{}},
		{"mixed case", 20, []string{"m"}},
		{"MIXED CASE TITLE", 20, []string{"m"}},
		{"xEd cAsE", 20, []string{"m"}},
		{"σελήνη", 20, []string{}}, // accented η is another letter
		{"σεληνη", 20, []string{"g"}},
		{"straße", 20, []string{"s"}},
		// Documented: simple case mapping only, no full folding.
		{"strasse", 20, []string{}},
	})
}

func TestSearchUpdate(t *testing.T) {
	for _, size := range []int{2, searchBlockSize} {
		t.Run(fmt.Sprintf("block %d", size), func(t *testing.T) { testSearchUpdate(t, size) })
	}
}

func testSearchUpdate(t *testing.T, size int) {
	ctx := context.Background()
	src := newFakeSummaries()
	src.put("a", "Alpha cup", 30)
	src.put("b", "Beta cup", 20)
	src.put("c", "Gamma cup", 10)
	x := loadedIndexSized(t, src, size)
	steps := []struct {
		name   string
		change func()
		ids    []string
		want   []string // search "cup"
	}{
		{"add", func() { src.put("d", "Delta cup", 25) }, []string{"d"}, []string{"a", "d", "b", "c"}},
		{"replace volume", func() { src.put("c", "Gamma cup", 40) }, []string{"c"}, []string{"c", "a", "d", "b"}},
		{"replace title", func() { src.put("a", "Cup final", 30) }, []string{"a"}, []string{"a", "c", "d", "b"}},
		{"remove", func() { src.remove("d") }, []string{"d"}, []string{"a", "c", "b"}},
		{"unknown id", func() {}, []string{"nope"}, []string{"a", "c", "b"}},
		{"same state again", func() {}, []string{"a", "b", "c"}, []string{"a", "c", "b"}},
		{"tie moves by id", func() { src.put("b", "Beta cup", 40) }, []string{"b"}, []string{"a", "b", "c"}},
		{"batch", func() {
			src.remove("a")
			src.put("e", "Epsilon cup", 1)
			src.put("c", "Gamma", 40)
			src.put("f", "cup f", 40)
		}, []string{"a", "e", "c", "f", "e"}, []string{"f", "b", "e"}},
		{"empty", func() {}, nil, []string{"f", "b", "e"}},
	}
	for _, st := range steps {
		st.change()
		if err := x.Update(ctx, st.ids); err != nil {
			t.Fatal(err)
		}
		checkSearchIndex(t, x)
		if got := searchIDs(t, x.Search("cup", 20)); !slices.Equal(got, st.want) {
			t.Errorf("%s: got %q, want %q", st.name, got, st.want)
		}
	}
	if got, want := x.Len(), 4; got != want {
		t.Errorf("len %d, want %d", got, want)
	}
	// The answer is the cached summary, byte for byte.
	if got, want := x.Search("", 1), searchSummary("b", "Beta cup", 40); len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Errorf("got %s, want the summary as cached: %s", got, want)
	}
}

// A Load that read the source before an Update keeps what the Update found:
// the Update's read may be the newer one.
func TestSearchLoadKeepsConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	src := newFakeSummaries()
	src.put("x", "Old x", 1)
	src.put("y", "Old y", 2)
	src.put("w", "Untouched w", 3)
	x := loadedIndex(t, src)

	reading, release := make(chan struct{}), make(chan struct{})
	src.afterRead = func() {
		close(reading)
		<-release
	}
	done := make(chan error)
	go func() { done <- x.Load(ctx) }()
	<-reading
	src.afterRead = nil
	src.put("x", "New x", 5)
	src.remove("y")
	src.put("z", "New z", 4)
	if err := x.Update(ctx, []string{"x", "y", "z"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := searchIDs(t, x.Search("", 20)), []string{"x", "z", "w"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := searchIDs(t, x.Search("new x", 20)); !slices.Equal(got, []string{"x"}) {
		t.Errorf("x: got %q, want the updated title", got)
	}
}

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

// filterReference answers q from ranked ids: prefix matches, then the others.
func filterReference(meta map[string]searchMeta, ranked []string, q string) []string {
	var pre, in []string
	lq := strings.ToLower(q)
	for _, id := range ranked {
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
func checkSearchIndex(t *testing.T, x *searchIndex) {
	t.Helper()
	s := x.snap.Load()
	n := 0
	var prev *searchEntry
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
			if b.text[b.starts[i]] != searchSep {
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
			if want := cmp.Or(b.title(i), string(searchSep))[0]; b.firsts[i] != want {
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
	for _, size := range []int{1, 3, 8, searchBlockSize} {
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
	for range 80 {
		src.put(id(), title(), float64(rng.IntN(5)))
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
				src.put(ids[i], title(), float64(rng.IntN(5)))
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
			all := filterReference(src.meta, ranked, q)
			for _, limit := range []int{1, 3, 20, 50} {
				got, want := x.Search(q, limit), all[:min(len(all), limit)]
				same := len(got) == len(want)
				for k := 0; same && k < len(got); k++ {
					same = bytes.Equal(got[k], src.m[want[k]])
				}
				if !same {
					t.Fatalf("step %d, q %q, limit %d:\n got %q\nwant %q", step, q, limit, searchIDs(t, got), want)
				}
			}
		}
	}
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

// loadedUpdating loads an index of src and runs its RunUpdates until the
// test ends.
func loadedUpdating(t *testing.T, src *fakeSummaries) *searchIndex {
	t.Helper()
	x := newSearchIndex(src)
	if err := x.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { x.RunUpdates(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return x
}

// runIndex runs x.Run with period every until the test ends.
func runIndex(t *testing.T, x *searchIndex, every time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		x.Run(ctx, every)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// waitIndexLen waits until x has loaded and holds n events.
func waitIndexLen(t *testing.T, x *searchIndex, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for x.Len() != n || !x.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("index holds %d, want %d (ready %v)", x.Len(), n, x.Ready())
		}
		time.Sleep(5 * time.Millisecond) // polling the index
	}
}

func TestSearchRun(t *testing.T) {
	src := newFakeSummaries()
	src.put("a", "Alpha", 1)
	x := newSearchIndex(src)
	runIndex(t, x, 10*time.Millisecond)
	// A notice that never came: the resync finds the new event anyway.
	src.put("b", "Beta", 2)
	waitIndexLen(t, x, 2)
}

// TestSearchRequestReload: a reload request (a flush notice) loads at once,
// not at the next period; requests while one is pending make one Load.
func TestSearchRequestReload(t *testing.T) {
	src := newFakeSummaries()
	src.put("a", "Alpha", 1)
	x := newSearchIndex(src)
	runIndex(t, x, time.Hour)
	waitLen := func(n int) { t.Helper(); waitIndexLen(t, x, n) }
	waitLen(1) // the first Load
	// Requests while one is pending are one: Run is held up in a Load (the
	// hook) while 100 requests arrive, then loads once more, and while that
	// Load runs no request is left pending.
	held, release, stop := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before runIndex's cleanup: a held Load ends
	src.mu.Lock()
	src.afterRead = func() {
		select {
		case held <- struct{}{}:
		case <-stop:
			return
		}
		select {
		case <-release:
		case <-stop:
		}
	}
	src.mu.Unlock()
	waitHeld := func(what string) {
		t.Helper()
		select {
		case <-held:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not load within 5 s (the period is an hour)", what)
		}
	}
	x.RequestReload()
	waitHeld("a reload request")
	src.put("b", "Beta", 2)
	for range 100 {
		x.RequestReload() // never blocks
	}
	release <- struct{}{}
	waitHeld("100 reload requests")
	if n := len(x.reload); n != 0 {
		t.Errorf("%d reload requests pending during the Load made for the 100 requests, want none", n)
	}
	src.mu.Lock()
	src.afterRead = nil
	src.mu.Unlock()
	release <- struct{}{}
	waitLen(2)
	if n := src.loadCount(); n != 3 {
		t.Errorf("%d Loads, want 3: the first, the one held up, and one for the 100 requests made meanwhile", n)
	}
}

// TestSearchQueuedUpdates: change notices queue their ids for one worker;
// the notices that arrive while an Update waits on Redis are re-read
// together by the next one.
func TestSearchQueuedUpdates(t *testing.T) {
	src := newFakeSummaries()
	src.put("a", "Alpha", 1)
	x := loadedUpdating(t, src)

	held, release := make(chan struct{}), make(chan struct{})
	src.mu.Lock()
	src.beforeOf = func() {
		select {
		case held <- struct{}{}:
			<-release // only the first Update waits
		default:
		}
	}
	src.mu.Unlock()
	src.put("b", "Beta", 2)
	x.Enqueue([]string{"b"})
	<-held
	for i := range 100 {
		id := fmt.Sprintf("c%03d", i)
		src.put(id, "Gamma "+id, 3)
		x.Enqueue([]string{id})
	}
	close(release)
	waitIndexLen(t, x, 102)
	src.mu.Lock()
	calls := src.ofCalls
	src.mu.Unlock()
	if calls != 2 {
		t.Errorf("%d Updates read Redis for 101 notices, want 2: the held one and one for the 100 queued meanwhile", calls)
	}
}

// TestSearchUpdateRetries: an update that fails (Redis unreachable) is
// tried again until it succeeds, without waiting for the full reload.
func TestSearchUpdateRetries(t *testing.T) {
	src := newFakeSummaries()
	src.put("a", "Alpha", 1)
	x := loadedUpdating(t, src)
	src.mu.Lock()
	src.failOf = 3
	src.mu.Unlock()
	src.put("b", "Beta", 2)
	x.Enqueue([]string{"b"})
	waitIndexLen(t, x, 2) // 3 failures: 0.1 + 0.2 + 0.4 s of waits
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.ofCalls != 4 {
		t.Errorf("%d reads, want 4 (3 failed, 1 that worked)", src.ofCalls)
	}
}

// The index over the real cache: summaries written by cache.Apply, read by
// Summaries and SummariesOf.
func TestSearchRedis(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	now := time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC)
	c := cache.New(rdb, prefix, cache.Rules{Retention: 24 * time.Hour, Now: func() time.Time { return now }})
	venue := func(s string) *string { return &s }
	event := func(id, title, status string, volume float64) *store.Event {
		return &store.Event{ID: id, Version: 1, Title: title, Category: "politics", Status: status,
			VenueIDs: [4]*string{venue("A-" + id), venue("b-" + id), nil, nil}, Volume: volume, UpdatedAt: now}
	}
	oneVenue := event("one", "Election with one venue", store.StatusActive, 99)
	oneVenue.VenueIDs[1] = nil
	apply := func(rev int64, events ...*store.Event) {
		t.Helper()
		res := &store.Result{}
		for _, e := range events {
			res.Events = append(res.Events, store.EventDoc{ID: e.ID, Rev: rev, Event: e})
		}
		if _, err := c.Apply(ctx, res); err != nil {
			t.Fatal(err)
		}
	}
	apply(1,
		event("a", "Election 2024", store.StatusActive, 10),
		event("B", "Election night", store.StatusActive, 10),
		event("aa", "election", store.StatusActive, 10),
		event("c", "US Election", store.StatusActive, 50),
		event("r", "Election resolved", store.StatusResolved, 80),
		oneVenue,
	)

	got, err := c.SummariesOf(ctx, []string{"a", "r", "one", "missing", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, []string{"a", "c"}) {
		t.Errorf("SummariesOf: ids %q, want [a c]", ids)
	}
	if empty, err := c.SummariesOf(ctx, nil); err != nil || len(empty) != 0 {
		t.Errorf("SummariesOf(nil) = %v, %v; want an empty map", empty, err)
	}

	x := loadedIndex(t, c)
	checkSearches(t, x, []searchCase{{"election", 20, []string{"B", "a", "aa", "c"}}})
	// Answers are the cached bytes.
	want, err := rdb.HGet(ctx, prefix+"{i}:s", "c").Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if ans := x.Search("us elec", 1); len(ans) != 1 || !bytes.Equal(ans[0], want) {
		t.Errorf("got %s, want the cached %s", ans, want)
	}

	merged := event("a", "Election 2024", store.StatusMerged, 10)
	merged.MergedInto = venue("B")
	apply(2, merged, event("aa", "election", store.StatusActive, 70), event("d", "Electoral map", store.StatusActive, 1))
	if err := x.Update(ctx, []string{"a", "aa", "d"}); err != nil {
		t.Fatal(err)
	}
	checkSearches(t, x, []searchCase{
		{"elect", 20, []string{"aa", "B", "d", "c"}},
		{"", 20, []string{"aa", "c", "B", "d"}},
	})
}

// searchCorpus builds n synthetic events: titles from a few templates, so
// queries of every selectivity exist.
func searchCorpus(n int) *fakeSummaries {
	rng := rand.New(rand.NewPCG(7, 8))
	people := []string{"Alice Martin", "Bob Nguyen", "Chloé Dubois", "Dmitri Volkov", "Eva Schmidt", "Farid Haddad", "Grace Lee", "Hiro Tanaka"}
	offices := []string{"Senate", "House", "Governor", "Mayor", "President", "Parliament"}
	places := []string{"Ohio", "Texas", "Québec", "Bavaria", "Kyoto", "Lagos", "Lima", "Oslo", "Perth", "Zürich"}
	things := []string{"BTC", "ETH", "gold", "oil", "S&P 500", "CPI", "GDP", "rates"}
	src := newFakeSummaries()
	for i := range n {
		var title string
		switch i % 4 {
		case 0:
			title = fmt.Sprintf("Will %s win the %d %s race in %s?", people[rng.IntN(len(people))], 2024+rng.IntN(4), offices[rng.IntN(len(offices))], places[rng.IntN(len(places))])
		case 1:
			title = fmt.Sprintf("%s above %d by %s %d?", things[rng.IntN(len(things))], rng.IntN(100000), []string{"June", "July", "December"}[rng.IntN(3)], 2025+rng.IntN(3))
		case 2:
			title = fmt.Sprintf("%s %s election: turnout over %d%%", places[rng.IntN(len(places))], offices[rng.IntN(len(offices))], 40+rng.IntN(50))
		default:
			title = fmt.Sprintf("Who will lead %s on %s? #%d", places[rng.IntN(len(places))], []string{"climate", "trade", "housing"}[rng.IntN(3)], i)
		}
		src.put(fmt.Sprintf("ev-%06d", i), title, float64(rng.IntN(1_000_000))/100)
	}
	return src
}

// searchQueries span selectivities: everything, a common prefix (early
// stop), common and rare substrings, a non-ASCII one, one title, none (a
// full scan).
var searchQueries = []string{"", "will", "election", "senate", "zürich", "#4242", "kyoto housing", "no such title"}

func BenchmarkSearch50k(b *testing.B) {
	x := loadedIndex(b, searchCorpus(50_000))
	for _, q := range searchQueries {
		b.Run(fmt.Sprintf("q=%q", q), func(b *testing.B) {
			for b.Loop() {
				x.Search(q, 20)
			}
		})
	}
}

// BenchmarkSearchUpdate50k is the cost of a change notice naming 10 events.
func BenchmarkSearchUpdate50k(b *testing.B) {
	src := searchCorpus(50_000)
	x := loadedIndex(b, src)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	ids := make([]string, 10)
	for b.Loop() {
		for i := range ids {
			ids[i] = fmt.Sprintf("ev-%06d", rng.IntN(50_000))
			src.put(ids[i], "Updated title "+ids[i], float64(rng.IntN(1_000_000))/100)
		}
		if err := x.Update(ctx, ids); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSearchLoad50k(b *testing.B) {
	x := newSearchIndex(searchCorpus(50_000))
	for b.Loop() {
		if err := x.Load(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchRandom50k runs random searches (parts and words of titles,
// random letters that mostly match nothing, empty and one-letter queries;
// limits 1–50) from GOMAXPROCS concurrent readers while a writer applies a
// notice of two events every 5 ms, and reports latency percentiles.
func BenchmarkSearchRandom50k(b *testing.B) {
	src := searchCorpus(50_000)
	x := loadedIndex(b, src)
	ids := slices.Sorted(maps.Keys(src.m))
	rng := rand.New(rand.NewPCG(13, 14))
	queries := make([]string, 1000)
	for i := range queries {
		title := src.meta[ids[rng.IntN(len(ids))]].title
		switch rng.IntN(4) {
		case 0: // part of a title: a prefix or inside
			from := rng.IntN(len(title)) * rng.IntN(2)
			queries[i] = title[from:min(len(title), from+1+rng.IntN(12))]
		case 1: // a word of a title
			words := strings.Fields(title)
			queries[i] = strings.ToUpper(words[rng.IntN(len(words))])
		case 2: // random letters: mostly no match
			l := make([]byte, 2+rng.IntN(8))
			for j := range l {
				l[j] = byte('a' + rng.IntN(26))
			}
			queries[i] = string(l)
		default: // empty or one character
			queries[i] = "aeiou #"[rng.IntN(7):][:rng.IntN(2)]
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		rng := rand.New(rand.NewPCG(15, 16))
		for ctx.Err() == nil {
			if err := x.Update(ctx, []string{ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))]}); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond) // pacing the writer, not waiting for an event
		}
	}()
	var mu sync.Mutex
	var durs []time.Duration
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			i := int(next.Add(1))
			start := time.Now()
			x.Search(queries[i%len(queries)], 1+i%50)
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		durs = append(durs, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	cancel()
	<-writer
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
}

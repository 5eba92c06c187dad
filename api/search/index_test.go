package search

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
)

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
	if got := New(src, nil).Search("", 20); got == nil || len(got) != 0 {
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
	for _, size := range []int{2, defaultBlockSize} {
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

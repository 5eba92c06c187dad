package world

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestScheduleVersionsAndPublishTimes(t *testing.T) {
	start := time.Now()
	draws := []int32{2, 0, 2, 2, 1, 0}
	i := 0
	s := NewSchedule(start, 3, len(draws), func() int32 { i++; return draws[i-1] })
	if want := []int64{2, 2, 3, 4, 2, 3}; !slices.Equal(s.Version, want) {
		t.Fatalf("versions %v, want %v", s.Version, want)
	}
	if _, ok := s.PubTime(2, 3); ok {
		t.Fatal("version published before Published was called")
	}
	s.Published(2, start.Add(5*time.Millisecond))
	if ns, ok := s.PubTime(2, 3); !ok || ns != int64(5*time.Millisecond) {
		t.Fatalf("pubTime(2, 3) = %d, %v; want 5 ms", ns, ok)
	}
	for _, c := range []struct {
		m int32
		v int64
	}{{2, 1}, {2, 5}, {1, 3}} {
		if _, ok := s.PubTime(c.m, c.v); ok {
			t.Errorf("pubTime(%d, %d) ok for a version never planned", c.m, c.v)
		}
	}
}

func TestPopularityRejectsBadParameters(t *testing.T) {
	for _, c := range []struct {
		markets int
		s, v    float64
	}{{10, 1, 1}, {10, 0.5, 1}, {10, 1.1, 0.5}, {0, 1.1, 1}} {
		if p, err := NewPopularity(c.markets, c.s, c.v, 1); err == nil {
			t.Errorf("NewPopularity(%d, s=%g, v=%g) = %v, want an error", c.markets, c.s, c.v, p)
		}
	}
}

// TestPopularityRanksMarkets: the ranks are a permutation of the markets
// fixed by the seed, and draws follow the ranks: the most popular market
// is drawn most, the second more than the third.
func TestPopularityRanksMarkets(t *testing.T) {
	const markets = 50
	p, err := NewPopularity(markets, 2, 1, 7)
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.Clone(p.byRank)
	slices.Sort(sorted)
	for i, m := range sorted {
		if m != int32(i) {
			t.Fatalf("ranks %v are not a permutation of %d markets", p.byRank, markets)
		}
	}
	again, _ := NewPopularity(markets, 2, 1, 7)
	other, _ := NewPopularity(markets, 2, 1, 8)
	if !slices.Equal(again.byRank, p.byRank) {
		t.Error("the same seed ranked the markets differently")
	}
	if slices.Equal(other.byRank, p.byRank) {
		t.Error("another seed ranked the markets the same")
	}

	draw := p.Drawer(NewRand(3))
	counts := make([]int, markets)
	for range 20_000 {
		m := draw()
		if m < 0 || m >= markets {
			t.Fatalf("drew market %d of %d", m, markets)
		}
		counts[m]++
	}
	top, second, third := counts[p.byRank[0]], counts[p.byRank[1]], counts[p.byRank[2]]
	if top != slices.Max(counts) || top <= second || second <= third {
		t.Errorf("draws of ranks 0, 1, 2: %d, %d, %d (max %d); want the ranks' order", top, second, third, slices.Max(counts))
	}
	// The same source seed draws the same markets.
	a, b := p.Drawer(NewRand(3)), p.Drawer(NewRand(3))
	for i := range 100 {
		if x, y := a(), b(); x != y {
			t.Fatalf("draw %d: %d and %d from the same seed", i, x, y)
		}
	}
}

// TestWatchlists: n lists of size distinct markets each, the same for the
// same seed.
func TestWatchlists(t *testing.T) {
	const markets, n, size = 30, 12, 8
	p, err := NewPopularity(markets, 1.1, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	lists := p.Watchlists(n, size, 2)
	if len(lists) != n {
		t.Fatalf("%d lists, want %d", len(lists), n)
	}
	for i, l := range lists {
		seen := map[int32]bool{}
		for _, m := range l {
			if m < 0 || m >= markets || seen[m] {
				t.Fatalf("list %d %v: want %d distinct markets of %d", i, l, size, markets)
			}
			seen[m] = true
		}
		if len(l) != size {
			t.Errorf("list %d has %d markets, want %d", i, len(l), size)
		}
	}
	if again := p.Watchlists(n, size, 2); !slices.EqualFunc(again, lists, slices.Equal) {
		t.Error("the same seed drew other watchlists")
	}
	if other := p.Watchlists(n, size, 3); slices.EqualFunc(other, lists, slices.Equal) {
		t.Error("another seed drew the same watchlists")
	}
}

// TestNewPollers: each poller asks for its watchlist by the markets' ids,
// keys go round the secrets, and consecutive pollers start on different
// nodes.
func TestNewPollers(t *testing.T) {
	lists := [][]int32{{3, 1}, {2}, {0, 1, 2}}
	ps := NewPollers(lists, func(m int32) string { return fmt.Sprintf("mk_%d", m) }, []string{"k1", "k2"})
	if len(ps) != len(lists) {
		t.Fatalf("%d pollers, want %d", len(ps), len(lists))
	}
	want := []struct {
		path, auth string
		next       int
	}{
		{"/public/v1/prices/snapshot?ids=mk_3,mk_1", "Bearer k1", 0},
		{"/public/v1/prices/snapshot?ids=mk_2", "Bearer k2", 1},
		{"/public/v1/prices/snapshot?ids=mk_0,mk_1,mk_2", "Bearer k1", 0},
	}
	for i, p := range ps {
		w := want[i]
		if p.N != i || p.Path != w.path || p.Auth != w.auth || p.Next != w.next {
			t.Errorf("poller %d: n %d path %q auth %q next %d; want %d %q %q %d", i, p.N, p.Path, p.Auth, p.Next, i, w.path, w.auth, w.next)
		}
		if !slices.Equal(p.Markets, lists[i]) {
			t.Errorf("poller %d watches %v, want %v", i, p.Markets, lists[i])
		}
		n := len(lists[i])
		if len(p.IDs) != n || len(p.Seen) != n || len(p.SeenNode) != n || len(p.SeenAt) != n || len(p.Versions) != n || len(p.Shown) != n {
			t.Errorf("poller %d: per-market state not sized for %d markets: %+v", i, n, p)
		}
	}
	if got := SnapshotPath(nil); got != "/public/v1/prices/snapshot?ids=" {
		t.Errorf("SnapshotPath(nil) = %q", got)
	}
}

// TestScheduleUpdateLatestUnpublish: Update finds the update of a market's
// version, Latest is the newest version published in order (1 before any),
// and Unpublish takes an update back.
func TestScheduleUpdateLatestUnpublish(t *testing.T) {
	start := time.Now()
	draws := []int32{1, 0, 1, 1} // market 1: v2 v3 v4 (updates 0, 2, 3); market 0: v2 (update 1)
	i := 0
	s := NewSchedule(start, 2, len(draws), func() int32 { i++; return draws[i-1] })
	for _, c := range []struct {
		m    int32
		v    int64
		n    int
		okay bool
	}{{1, 2, 0, true}, {0, 2, 1, true}, {1, 3, 2, true}, {1, 4, 3, true}, {1, 5, 0, false}, {0, 3, 0, false}, {1, 1, 0, false}} {
		if n, ok := s.Update(c.m, c.v); n != c.n || ok != c.okay {
			t.Errorf("Update(%d, %d) = %d, %v; want %d, %v", c.m, c.v, n, ok, c.n, c.okay)
		}
	}
	if got := s.Latest(1); got != 1 {
		t.Errorf("Latest before any publish = %d, want the world's 1", got)
	}
	s.Published(0, start.Add(time.Millisecond))
	s.Published(2, start.Add(2*time.Millisecond))
	if got := s.Latest(1); got != 3 {
		t.Errorf("Latest = %d, want 3", got)
	}
	if got := s.Latest(0); got != 1 {
		t.Errorf("Latest of a market with nothing published = %d, want 1", got)
	}
	// The publisher stopped before handing v3 over: it is not out.
	s.Unpublish(2)
	if got := s.Latest(1); got != 2 {
		t.Errorf("Latest after v3 was taken back = %d, want 2", got)
	}
	if _, ok := s.PubTime(1, 3); ok {
		t.Error("PubTime of an unpublished update: ok")
	}
	if got := s.Since(start.Add(4 * time.Millisecond)); got != int64(4*time.Millisecond) {
		t.Errorf("Since = %d, want 4 ms in ns", got)
	}
}

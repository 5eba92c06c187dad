package cache

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is otter's clock, moved by the test.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) NowNano() int64                      { return c.ns.Load() }
func (c *fakeClock) Tick(time.Duration) <-chan time.Time { return nil } // no periodic clean-up
func (c *fakeClock) advance(d time.Duration)             { c.ns.Add(int64(d)) }
func newFakeClock() *fakeClock                           { c := &fakeClock{}; c.ns.Store(1e18); return c }
func weighBytes(k string, v []byte) uint32               { return uint32(len(k) + len(v)) }
func testMemory(g *epochs, c *fakeClock, maxBytes int) *memory[string, []byte] {
	return newMemory(g, memoryConfig[string, []byte]{maxBytes: maxBytes, weigh: weighBytes, ttl: 2 * time.Second, clock: c})
}

// TestMemoryEpochGuard: an answer is stored only if no invalidation (of any
// memory sharing the epochs) happened since its read began; a drop forgets
// exactly its keys, a flush everything.
func TestMemoryEpochGuard(t *testing.T) {
	var g epochs
	clock := newFakeClock()
	m, other := testMemory(&g, clock, 1<<20), testMemory(&g, clock, 1<<20)
	t.Cleanup(m.close)
	t.Cleanup(other.close)

	e := g.now()
	if !m.put("a", []byte("A1"), e) || !m.put("b", []byte("B1"), e) {
		t.Fatal("put with the current epoch refused")
	}
	// b's second read began before a drop of another memory: not stored.
	stale := g.now()
	other.drop("x")
	if m.put("b", []byte("B-old"), stale) {
		t.Error("a read that began before a drop (of another resource) was stored")
	}
	if v, ok := m.get("b"); !ok || string(v) != "B1" {
		t.Errorf("b = %q, %v; want the first answer, still held", v, ok)
	}

	m.drop("a")
	if _, ok := m.get("a"); ok {
		t.Error("a still held after its drop")
	}
	if _, ok := m.get("b"); !ok {
		t.Error("b forgotten by a drop of a")
	}

	e = g.now()
	m.flush()
	if _, ok := m.get("b"); ok {
		t.Error("b held after a flush")
	}
	if m.put("c", []byte("C"), e) {
		t.Error("a read that began before a flush was stored")
	}

	m.dropIf(func(string, []byte) bool { return false })
	if g.now() == e+1 {
		t.Error("a predicate drop that matched nothing did not move the epoch")
	}
}

// TestMemoryTTL: a value is held for the TTL after it was stored, then not.
func TestMemoryTTL(t *testing.T) {
	var g epochs
	clock := newFakeClock()
	m := testMemory(&g, clock, 1<<20)
	t.Cleanup(m.close)
	m.put("a", []byte("A"), g.now())
	clock.advance(1999 * time.Millisecond)
	if _, ok := m.get("a"); !ok {
		t.Error("a not held before its TTL")
	}
	clock.advance(time.Millisecond)
	if _, ok := m.get("a"); ok {
		t.Error("a held at its TTL")
	}
}

// TestMemorySizeBound: the summed weight stays within the bound (otter
// chooses what goes), and a value heavier than a quarter of it is refused.
func TestMemorySizeBound(t *testing.T) {
	var g epochs
	m := testMemory(&g, newFakeClock(), 10_000)
	t.Cleanup(m.close)
	for i := range 1000 {
		m.put(fmt.Sprintf("k%04d", i), make([]byte, 95), g.now())
	}
	m.c.CleanUp()
	if w := m.c.WeightedSize(); w > 10_000 || w < 5_000 {
		t.Errorf("weighted size %d after 100 KB of puts, want within (5 KB, 10 KB]", w)
	}
	if m.put("big", make([]byte, 2600), g.now()) {
		t.Error("a value over a quarter of the bound was stored")
	}
	if !m.put("fits", make([]byte, 2400), g.now()) {
		t.Error("a value under a quarter of the bound was refused")
	}
}

// TestPagesHolding: a notice drops exactly the pages whose id range holds
// one of its events (a full page covers (after, last], a short one
// everything above after); a read that began before the drop does not
// store its page; pages expire after the TTL.
func TestPagesHolding(t *testing.T) {
	var g epochs
	clock := newFakeClock()
	p := newMemory(&g, memoryConfig[pageKey, Page]{maxBytes: 1 << 20, weigh: pageWeight, ttl: 2 * time.Second, clock: clock})
	t.Cleanup(p.close)
	first := pageKey{set: "*:*:1", after: "", count: 3}
	middle := pageKey{set: "*:*:1", after: "c", count: 3}
	last := pageKey{set: "*:*:1", after: "g", count: 3} // a short page: the set's end
	other := pageKey{set: "politics:*:1", after: "", count: 3}
	fill := func() {
		t.Helper()
		for k, ids := range map[pageKey][]string{first: {"a", "b", "c"}, middle: {"d", "e", "f"}, last: {"h"}, other: {"b"}} {
			if _, ok := p.get(k); ok {
				continue
			}
			sums := make([][]byte, len(ids))
			for i, id := range ids {
				sums[i] = []byte(`{"universal_id":"` + id + `"}`)
			}
			p.put(k, Page{IDs: ids, Summaries: sums}, g.now())
		}
	}
	held := func() (out []string) {
		for _, k := range []pageKey{first, middle, last, other} {
			if _, ok := p.get(k); ok {
				out = append(out, k.set+"/"+k.after)
			}
		}
		return out
	}
	fill()
	if got := held(); len(got) != 4 {
		t.Fatalf("after storing 4 pages: held %q", got)
	}
	pg, ok := p.get(middle)
	if !ok || !slices.Equal(pg.IDs, []string{"d", "e", "f"}) || string(pg.Summaries[2]) != `{"universal_id":"f"}` {
		t.Fatalf("middle page: %q %q %v", pg.IDs, pg.Summaries, ok)
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
		p.dropIf(pagesHolding(tc.drop))
		if got := held(); !slices.Equal(got, tc.want) {
			t.Errorf("drop %q: held %q, want %q", tc.drop, got, tc.want)
		}
	}

	// A read that began before a drop does not store its page.
	p.flush()
	epoch := g.now()
	p.dropIf(pagesHolding([]string{"zzz"}))
	p.put(first, Page{IDs: []string{"a"}, Summaries: [][]byte{[]byte("{}")}}, epoch)
	if _, ok := p.get(first); ok {
		t.Error("a page read before a drop was stored")
	}

	// The TTL.
	fill()
	clock.advance(2 * time.Second)
	if got := held(); len(got) != 0 {
		t.Errorf("after the TTL: held %q, want none", got)
	}

	// Pages that are each short (the end of their set): an id above all of
	// them is in every one's range.
	for _, after := range []string{"g", "h", "i", "j"} {
		p.put(pageKey{set: "s", after: after, count: 2}, Page{IDs: []string{after + "1"}, Summaries: [][]byte{[]byte("{}")}}, g.now())
	}
	p.dropIf(pagesHolding([]string{"j0"}))
	for k := range p.c.Keys() {
		t.Errorf("after dropping an id above every page: %v still held", k)
	}
}

// TestAppliedSeqs: notices arriving in any order advance applied over what
// arrived without a gap; memory may answer only for a number at most
// applied; a gap open longer than the wait drops memory and counts its
// numbers as lost; a counter far below or far above what was applied
// (Redis reset or lost it) drops memory without counting lost notices.
func TestAppliedSeqs(t *testing.T) {
	now := time.Unix(1000, 0)
	var forgot int
	var lost int64
	var restarts int
	a := newAppliedSeqs(500*time.Millisecond, func() time.Time { return now }, func() { forgot++ },
		func(n int64, restarted bool) {
			lost += n
			if restarted {
				restarts++
			}
		})
	const base = 1_000_000_000

	// The node starts: it learns the counter, and trusts nothing until the
	// notices in flight had time to arrive.
	if a.mayServe(base) {
		t.Fatal("memory trusted before the start's wait")
	}
	now = now.Add(500 * time.Millisecond)
	if !a.mayServe(base) || forgot != 1 || lost != 0 || restarts != 0 {
		t.Fatalf("after the start's wait: mayServe false, or forgot %d, lost %d, restarts %d; want true, 1, 0, 0", forgot, lost, restarts)
	}

	// Out of order: base+2 before base+1.
	a.arrived(base + 2)
	if a.mayServe(base + 2) {
		t.Error("base+2 trusted while base+1's notice is missing")
	}
	if !a.mayServe(base) {
		t.Error("base not trusted: nothing above it was asked for")
	}
	a.arrived(base + 1)
	if !a.mayServe(base + 2) {
		t.Error("base+2 not trusted once base+1 arrived")
	}
	// A number read from Redis before its notice: not trusted until then.
	if a.mayServe(base + 3) {
		t.Error("base+3 trusted before its notice")
	}
	a.arrived(base + 3)
	if !a.mayServe(base+3) || forgot != 1 {
		t.Errorf("after base+3's notice: mayServe false or forgot %d; want true, 1", forgot)
	}

	// A lost notice: base+4 never comes, base+5 and base+6 do.
	a.arrived(base + 5)
	a.arrived(base + 6)
	now = now.Add(499 * time.Millisecond)
	if a.mayServe(base+6) || forgot != 1 {
		t.Fatalf("gap trusted or memory dropped before the wait (forgot %d)", forgot)
	}
	now = now.Add(time.Millisecond)
	if !a.mayServe(base+6) || forgot != 2 || lost != 1 {
		t.Errorf("after the wait: forgot %d, lost %d; want memory dropped once more and 1 lost, and trusted", forgot, lost)
	}
	// Its notice, late: nothing more happens.
	a.arrived(base + 4)
	if !a.mayServe(base+6) || forgot != 2 {
		t.Errorf("a late notice: forgot %d, want 2", forgot)
	}

	// Redis lost its counter, which restarted at its clock: far above.
	far := int64(base + 10*restartJump)
	a.arrived(far)
	if a.mayServe(far) {
		t.Error("a restarted counter trusted at once")
	}
	now = now.Add(500 * time.Millisecond)
	if !a.mayServe(far) || lost != 1 || restarts != 1 || forgot != 3 {
		t.Errorf("after a restart above: lost %d, restarts %d, forgot %d; want 1, 1, 3", lost, restarts, forgot)
	}

	// Someone set the counter far below: memory dropped, numbers start over.
	a.arrived(7)
	if restarts != 2 || forgot != 4 {
		t.Errorf("a notice far below: restarts %d, forgot %d; want 2, 4", restarts, forgot)
	}
	a.arrived(8)
	if a.mayServe(8) {
		t.Error("after starting over at 7: 8 trusted at once (numbers up to 7 may be in flight)")
	}
	now = now.Add(500 * time.Millisecond)
	if !a.mayServe(8) || a.mayServe(9) {
		t.Error("after starting over at 7 and a wait: 8 not trusted, or 9 trusted before its notice")
	}
	if lost != 1 {
		t.Errorf("lost %d after the restarts, want still 1", lost)
	}
}

// TestAppliedSeqsAwait: a read that found notices in flight waits for them:
// await returns as soon as the notice of the number it waits for (and of
// every number below) arrives, and gives up after its wait otherwise.
func TestAppliedSeqsAwait(t *testing.T) {
	a := newAppliedSeqs(time.Hour, time.Now, func() {}, func(int64, bool) {})
	a.arrived(1) // the node's first notice: applied starts at 1
	if !a.await(context.Background(), 1, time.Millisecond) {
		t.Fatal("await(1) = false with 1 applied")
	}
	// 3 waits for 2 and 3; 3 arriving alone is not enough.
	done := make(chan bool, 1)
	go func() { done <- a.await(context.Background(), 3, 10*time.Second) }()
	a.arrived(3)
	select {
	case ok := <-done:
		t.Fatalf("await(3) returned %v with 2 not applied", ok)
	case <-time.After(50 * time.Millisecond):
	}
	a.arrived(2)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("await(3) = false after 2 and 3 arrived")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("await(3) still waiting 5 s after 2 and 3 arrived")
	}
	start := time.Now()
	if a.await(context.Background(), 4, 20*time.Millisecond) {
		t.Fatal("await(4) = true with 4 never arrived")
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("await(4) gave up after %v, before its 20ms", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if a.await(ctx, 4, time.Hour) {
		t.Fatal("await with a cancelled context = true")
	}
}

// TestAppliedSeqsGapKeepsLaterWrites: when a gap times out, only the numbers
// seen when it opened are given up; a number first seen later is a write
// still in flight, and memory is not trusted for it before its notice or a
// wait of its own (else a node would serve an old version of what that
// write changes while another node already shows the new one).
func TestAppliedSeqsGapKeepsLaterWrites(t *testing.T) {
	now := time.Unix(1000, 0)
	var lost int64
	a := newAppliedSeqs(500*time.Millisecond, func() time.Time { return now }, func() {},
		func(n int64, _ bool) { lost += n })
	a.arrived(1)
	a.arrived(3) // 2's notice is lost
	now = now.Add(400 * time.Millisecond)
	if a.mayServe(4) { // 4 taken by a writer, its write and notice in flight
		t.Fatal("4 trusted with 2 missing")
	}
	now = now.Add(100 * time.Millisecond) // 2's gap times out
	if a.mayServe(4) {
		t.Fatal("4 trusted when 2's gap timed out: 4 was first seen after the gap opened, its notice has not come")
	}
	if lost != 1 {
		t.Errorf("lost %d, want 1 (number 2)", lost)
	}
	if !a.mayServe(3) {
		t.Error("3 not trusted after 2's gap timed out")
	}
	a.arrived(4)
	if !a.mayServe(4) {
		t.Error("4 not trusted after its notice")
	}
	// 5 seen, its notice lost too: it gets its own wait.
	if a.mayServe(5) {
		t.Fatal("5 trusted before its notice")
	}
	now = now.Add(499 * time.Millisecond)
	if a.mayServe(5) {
		t.Fatal("5 trusted before its own wait ended")
	}
	now = now.Add(time.Millisecond)
	if !a.mayServe(5) || lost != 2 {
		t.Errorf("after 5's wait: trusted false or lost %d; want true, 2", lost)
	}
}

// TestAppliedSeqsAwaitSkipsOldGap: while a lost notice's gap is open, a
// read does not wait for notices at all: waiting cannot close that gap.
func TestAppliedSeqsAwaitSkipsOldGap(t *testing.T) {
	now := time.Unix(1000, 0)
	a := newAppliedSeqs(time.Hour, func() time.Time { return now }, func() {}, func(int64, bool) {})
	a.arrived(1)
	a.arrived(3) // 2 late: the gap opens now
	now = now.Add(2 * time.Minute)
	// 2 arrives 20 ms from now: a read that waited would see it and answer
	// true; one that saw the gap is older than its wait answers false at once.
	go func() {
		time.Sleep(20 * time.Millisecond)
		a.arrived(2)
	}()
	if a.await(context.Background(), 3, time.Minute) {
		t.Fatal("await(3) waited on a gap older than its wait")
	}
}

package search

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// loadedUpdating loads an index of src and runs its RunUpdates until the
// test ends.
func loadedUpdating(t *testing.T, src *fakeSummaries) *Index {
	t.Helper()
	x := New(src, nil)
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
func runIndex(t *testing.T, x *Index, every time.Duration) {
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
func waitIndexLen(t *testing.T, x *Index, n int) {
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
	x := New(src, nil)
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
	x := New(src, nil)
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

// TestSearchServe: Serve retries a Load that fails (Redis and Postgres not
// answering yet) until one works, then keeps the index fresh.
func TestSearchServe(t *testing.T) {
	src := newFakeSummaries()
	src.put("a", "Alpha", 1)
	src.mu.Lock()
	src.failLoads = 2
	src.mu.Unlock()
	x := New(src, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	x.Serve(ctx, time.Hour)
	if !x.Ready() || x.Len() != 1 {
		t.Fatalf("after Serve: ready %v, %d events; want ready with 1", x.Ready(), x.Len())
	}
	if n := src.loadCount(); n != 3 {
		t.Errorf("%d Loads, want 3 (2 failed, 1 that worked)", n)
	}
	// Serve started the updates: a notice's ids reach the index.
	src.put("b", "Beta", 2)
	x.Enqueue([]string{"b"})
	waitIndexLen(t, x, 2)
}

// TestSearchServeCancelled: Serve returns when its context ends while the
// source does not answer, and the index stays unready.
func TestSearchServeCancelled(t *testing.T) {
	src := newFakeSummaries()
	src.mu.Lock()
	src.failLoads = 1 << 30
	src.mu.Unlock()
	x := New(src, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	x.Serve(ctx, time.Hour)
	if x.Ready() {
		t.Error("ready although no Load worked")
	}
}

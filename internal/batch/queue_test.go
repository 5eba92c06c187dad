package batch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type item struct {
	Entry
	n int
}

// gated is a send function that holds its first batch until open is
// closed, so that a test can queue items behind it.
type gated struct {
	mu      sync.Mutex
	batches [][]int
	started chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGated() *gated { return &gated{started: make(chan struct{}), open: make(chan struct{})} }

func (g *gated) send(b []*item) {
	g.once.Do(func() {
		close(g.started)
		<-g.open
	})
	ns := make([]int, len(b))
	for i, it := range b {
		ns[i] = it.n
	}
	g.mu.Lock()
	g.batches = append(g.batches, ns)
	g.mu.Unlock()
}

func (g *gated) sent() [][]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.batches)
}

// held returns a queue whose one sender holds its first batch (the item
// it returns) until g.open is closed.
func held(t *testing.T, cfg Config) (*gated, *Queue[*item], *item) {
	t.Helper()
	g := newGated()
	q := New(cfg, g.send)
	t.Cleanup(q.Close)
	first := &item{n: 0}
	put(t, q, first)
	<-g.started
	return g, q, first
}

func put(t *testing.T, q *Queue[*item], it *item) {
	t.Helper()
	if err := q.Put(context.Background(), it, nil); err != nil {
		t.Fatalf("Put %d: %v", it.n, err)
	}
}

// waitFor polls until cond holds, or fails the test after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestQueueOrderAndMax(t *testing.T) {
	g, q, _ := held(t, Config{Max: 4, Senders: 1, Depth: 64})
	for n := 1; n <= 10; n++ {
		put(t, q, &item{n: n})
	}
	close(g.open)
	waitFor(t, "11 items sent", func() bool {
		total := 0
		for _, b := range g.sent() {
			total += len(b)
		}
		return total == 11
	})
	got := g.sent()
	want := [][]int{{0}, {1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches: got %v, want %v (queue order, at most Max a batch)", got, want)
	}
}

func TestQueueAbandon(t *testing.T) {
	g, q, first := held(t, Config{Max: 8, Senders: 1, Depth: 64})
	if first.Abandon() {
		t.Error("Abandon of a taken item: true, want false (the sender has it)")
	}
	var items []*item
	for n := 1; n <= 4; n++ {
		it := &item{n: n}
		put(t, q, it)
		items = append(items, it)
	}
	if !items[1].Abandon() || !items[3].Abandon() {
		t.Fatal("Abandon of a queued item: false, want true")
	}
	if items[1].Abandon() {
		t.Error("second Abandon: true, want false")
	}
	close(g.open)
	waitFor(t, "the second batch", func() bool { return len(g.sent()) == 2 })
	if got, want := g.sent(), [][]int{{0}, {1, 3}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches: got %v, want %v (abandoned items never sent)", got, want)
	}
	if items[0].Abandon() {
		t.Error("Abandon after it was sent: true, want false")
	}
}

// TestQueueAbandonOnCancel is how callers use Abandon: wait for the answer
// or the context, and give the item up when the context ends first.
func TestQueueAbandonOnCancel(t *testing.T) {
	g, q, _ := held(t, Config{Max: 8, Senders: 1, Depth: 64})
	ctx, cancel := context.WithCancel(context.Background())
	it := &item{n: 1}
	if err := q.Put(ctx, it, nil); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-ctx.Done()
	if !it.Abandon() {
		t.Fatal("Abandon after cancel, before the sender took it: false")
	}
	close(g.open)
	put(t, q, &item{n: 2})
	waitFor(t, "the item after", func() bool { return len(g.sent()) == 2 })
	if got, want := g.sent(), [][]int{{0}, {2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches: got %v, want %v", got, want)
	}
}

func TestQueuePutGivesUp(t *testing.T) {
	g, q, _ := held(t, Config{Max: 1, Senders: 1, Depth: 1})
	defer close(g.open)
	put(t, q, &item{n: 1}) // fills the queue
	expire := time.After(10 * time.Millisecond)
	if err := q.Put(context.Background(), &item{n: 2}, expire); !errors.Is(err, ErrFull) {
		t.Errorf("Put on a full queue past its deadline: %v, want ErrFull", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Put(ctx, &item{n: 3}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Put on a full queue, context ended: %v, want context.Canceled", err)
	}
}

// TestQueueNoLostItem puts items from many goroutines while some callers
// abandon theirs: every item is either sent exactly once or abandoned,
// never both and never neither, and no batch is over Max.
func TestQueueNoLostItem(t *testing.T) {
	const callers, each, maxBatch = 8, 500, 16
	seen := make([]atomic.Int32, callers*each)
	var oversize atomic.Int32
	q := New(Config{Max: maxBatch, Senders: 2, Depth: 32}, func(b []*item) {
		if len(b) > maxBatch {
			oversize.Add(1)
		}
		for _, it := range b {
			seen[it.n].Add(1)
		}
	})
	defer q.Close()
	abandonedBy := make([]atomic.Bool, callers*each)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				it := &item{n: c*each + i}
				if err := q.Put(context.Background(), it, nil); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 && it.Abandon() {
					abandonedBy[it.n].Store(true)
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, "every item sent or abandoned", func() bool {
		for n := range seen {
			if seen[n].Load() == 0 && !abandonedBy[n].Load() {
				return false
			}
		}
		return true
	})
	for n := range seen {
		sent, ab := seen[n].Load(), abandonedBy[n].Load()
		if sent > 1 || (sent == 1) == ab {
			t.Errorf("item %d: sent %d times, abandoned %v", n, sent, ab)
		}
	}
	if oversize.Load() != 0 {
		t.Errorf("%d batches over Max", oversize.Load())
	}
}

func TestQueueClose(t *testing.T) {
	var sent atomic.Int32
	q := New(Config{Max: 4, Senders: 2, Depth: 8}, func(b []*item) { sent.Add(int32(len(b))) })
	put(t, q, &item{n: 0})
	waitFor(t, "the first item", func() bool { return sent.Load() == 1 })
	q.Close()
	q.Close()
	time.Sleep(20 * time.Millisecond) // let the senders see stop
	put(t, q, &item{n: 1})
	time.Sleep(20 * time.Millisecond)
	if got := sent.Load(); got != 1 {
		t.Errorf("after Close: %d items sent, want 1", got)
	}
}

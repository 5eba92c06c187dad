package ingest_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/metrictest"
)

// interleavingCache runs another worker's Step right after a worker read
// the shared cursor and before it gets the answer: the worst moment for a
// worker that reads the cursor outside the lock.
type interleavingCache struct {
	ingest.AntiEntropyCache
	mu     sync.Mutex
	other  func()
	inHook bool
	set    []string // the positions written, in order
}

func (c *interleavingCache) Cursor(ctx context.Context, name string) (string, error) {
	pos, err := c.AntiEntropyCache.Cursor(ctx, name)
	c.mu.Lock()
	run := c.other != nil && !c.inHook
	c.inHook = c.inHook || run
	c.mu.Unlock()
	if run {
		c.other()
		c.mu.Lock()
		c.inHook = false
		c.mu.Unlock()
	}
	return pos, err
}

func (c *interleavingCache) SetCursor(ctx context.Context, name, v string) error {
	c.mu.Lock()
	c.set = append(c.set, v)
	c.mu.Unlock()
	return c.AntiEntropyCache.SetCursor(ctx, name, v)
}

// TestAntiEntropyStepCursorUnderLock: two workers whose steps interleave at
// the cursor read compare every page of the walk exactly once, and the
// shared position only moves forwards.
func TestAntiEntropyStepCursorUnderLock(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ingestBatch(t, e.st, e.cache, aeBatch(15, 1))
	if _, err := e.cache.Rebuild(ctx, e.st); err != nil {
		t.Fatal(err)
	}
	// What one walk compares, for reference.
	ref, _ := newAntiEntropy(t, e.st, e.cache, nil, "", prometheus.NewRegistry(), 10)
	whole, err := ref.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}

	ic := &interleavingCache{AntiEntropyCache: e.cache}
	newWorker := func(reg *prometheus.Registry) *ingest.AntiEntropy {
		cfg := ingest.DefaultAntiEntropyConfig()
		cfg.Page = 10
		return mustAntiEntropy(t, cfg, ingest.AntiEntropyDeps{Store: e.st, Cache: ic, Metrics: ingest.NewAntiEntropyMetrics(reg)})
	}
	reg1, reg2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	a1, a2 := newWorker(reg1), newWorker(reg2)
	var checked int
	ic.other = func() {
		st, err := a2.Step(ctx)
		if err != nil {
			t.Errorf("step of worker 2: %v", err)
		}
		checked += st.Checked
	}
	// 45 documents, 10 a page: 4 full pages, then a short one ends the walk.
	for i := 0; metrictest.Value(t, reg1, lastPassMetric) == 0 && metrictest.Value(t, reg2, lastPassMetric) == 0; i++ {
		if i == 20 {
			t.Fatalf("the walk did not end in %d steps; positions written: %q", i, ic.set)
		}
		st, err := a1.Step(ctx)
		if err != nil {
			t.Fatalf("step of worker 1: %v", err)
		}
		checked += st.Checked
	}
	if checked != whole.Checked {
		t.Errorf("checked over the shared walk: got %d, want %d (one pass); positions written: %q", checked, whole.Checked, ic.set)
	}
	last := ""
	for i, pos := range ic.set {
		_, name, _ := strings.Cut(pos, "|")
		if pos == "" {
			if i != len(ic.set)-1 {
				t.Errorf("walk ended at write %d of %d: %q", i+1, len(ic.set), ic.set)
			}
			continue
		}
		if name <= last {
			t.Errorf("position %d: got %q after %q, want it to move forwards; all: %q", i+1, name, last, ic.set)
		}
		last = name
	}
	if len(ic.set) != 5 {
		t.Errorf("positions written: got %d (%q), want 5 (4 pages, then the end)", len(ic.set), ic.set)
	}
}

package ratelog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestAllow: the first occurrence at once, then one per Every with the count
// held back meanwhile.
func TestAllow(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l := &Limiter{Every: 10 * time.Second, Now: c.now}
	counted := 0
	type step struct {
		advance    time.Duration
		ok         bool
		suppressed int
	}
	for i, s := range []step{
		{0, true, 0},                   // first: at once
		{time.Second, false, 0},        // held back (1)
		{time.Second, false, 0},        // held back (2)
		{7 * time.Second, false, 0},    // 9 s after the first: held back (3)
		{time.Second, true, 3},         // 10 s: written, with the 3
		{0, false, 0},                  // held back (1)
		{30 * time.Second, true, 1},    // long quiet: written at once
		{10*time.Second - 1, false, 0}, // just under Every
		{1, true, 1},                   // exactly Every
	} {
		c.add(s.advance)
		ok, n := l.Allow()
		if ok != s.ok || n != s.suppressed {
			t.Errorf("step %d: got %v, %d; want %v, %d", i, ok, n, s.ok, s.suppressed)
		}
		if ok {
			counted += 1 + n
		}
	}
	// Every occurrence is accounted for: written, or counted in a later line
	// (the last step is written, so none is still held back).
	if got, want := counted, 9; got != want {
		t.Errorf("occurrences written or counted as held back: got %d, want %d", got, want)
	}
}

// TestZeroValue: a zero Limiter writes the first and holds back the rest of
// a burst (DefaultEvery on the wall clock).
func TestZeroValue(t *testing.T) {
	var l Limiter
	if ok, _ := l.Allow(); !ok {
		t.Fatal("first occurrence: got held back, want written")
	}
	for i := range 100 {
		if ok, _ := l.Allow(); ok {
			t.Fatalf("occurrence %d of a burst: got written, want held back", i+2)
		}
	}
}

// TestLogConcurrent: 600 occurrences from many goroutines within one
// interval give one JSON line; the next interval's line counts the other 599.
func TestLogConcurrent(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l := &Limiter{Now: c.now}
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	var wg sync.WaitGroup
	for range 600 {
		wg.Go(func() {
			l.Log(context.Background(), log, slog.LevelWarn, "limits decided by this node alone", "err", "redis down")
		})
	}
	wg.Wait()
	c.add(DefaultEvery)
	l.Log(context.Background(), log, slog.LevelWarn, "limits decided by this node alone", "err", "redis down")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: got %d, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []float64{0, 599} {
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["level"] != "WARN" || rec["err"] != "redis down" || rec["suppressed"] != want {
			t.Errorf("line %d: got %v, want WARN with err and suppressed %v", i, rec, want)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

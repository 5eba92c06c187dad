package usage

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// flakyUsage is a Store that refuses or loses answers on demand and
// applies each batch id once, as store.Store does.
type flakyUsage struct {
	mu      sync.Mutex
	applied map[string]bool
	total   map[string]int64 // route → count
	days    map[time.Time]int64
	// refuse fails the next call without applying; ambiguous applies the
	// next batch and still reports a failure (a commit whose answer was
	// lost).
	refuse, ambiguous bool
	// sweeps counts SweepUsage calls; sweepErr fails them.
	sweeps   int
	sweepErr error
}

func newFlaky() *flakyUsage {
	return &flakyUsage{applied: map[string]bool{}, total: map[string]int64{}, days: map[time.Time]int64{}}
}

func (f *flakyUsage) AddUsage(_ context.Context, id string, counts []store.UsageCount) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse {
		f.refuse = false
		return false, errors.New("connection refused")
	}
	if !f.applied[id] {
		f.applied[id] = true
		for _, c := range counts {
			f.total[c.Route] += c.Count
			f.days[c.Day] += c.Count
		}
	}
	if f.ambiguous {
		f.ambiguous = false
		return true, errors.New("connection reset after commit")
	}
	return true, nil
}

func (f *flakyUsage) Usage(_ context.Context, q store.UsageQuery) ([]store.UsageCount, error) {
	return []store.UsageCount{{AccountID: q.AccountID, Route: q.Route, Count: 1}}, nil
}

func (f *flakyUsage) SweepUsage(context.Context, time.Time) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweeps++
	if f.sweepErr != nil {
		return 0, f.sweepErr
	}
	return 3, nil
}

func (f *flakyUsage) totalOf(route string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total[route]
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// logBuffer is a log the background sweep may write while the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) contains(s string) bool { return strings.Contains(l.String(), s) }

// TestUsageFlushRetries: a failed flush keeps its counts and the next one
// writes them with what was counted since; a batch whose commit was not
// heard of is retried under its id, so it is not added twice.
func TestUsageFlushRetries(t *testing.T) {
	st := newFlaky()
	l := New(st, Options{Count: true, Interval: time.Second, Log: quiet(), Now: time.Now})
	add := func(n int) {
		for range n {
			l.Count("acc", RouteKey)
		}
	}
	flush := func(wantErr bool) {
		t.Helper()
		if err := l.flush(t.Context()); (err != nil) != wantErr {
			t.Fatalf("flush: %v, want error %v", err, wantErr)
		}
	}
	add(5)
	st.refuse = true
	flush(true)
	add(3)
	flush(false)
	if got := st.total["key"]; got != 8 {
		t.Fatalf("after a refused flush and a good one: %d, want 8", got)
	}
	add(2)
	st.ambiguous = true
	flush(true)
	add(1)
	flush(false)
	if got := st.total["key"]; got != 11 {
		t.Fatalf("after a commit whose answer was lost, retried: %d, want 11 (never added twice)", got)
	}
	flush(false)
	if got := st.total["key"]; got != 11 {
		t.Fatalf("an empty flush: %d, want 11", got)
	}
}

// TestLedgerStartClose: a started ledger flushes every interval and its
// Close writes what is left, retrying a refused write; a ledger that does
// not count writes nothing and closes at once.
func TestLedgerStartClose(t *testing.T) {
	st := newFlaky()
	l := New(st, Options{Count: true, Interval: 10 * time.Millisecond, Log: quiet()})
	l.Start()
	l.Start() // once
	l.Count("acc", RouteEvents)
	deadline := time.Now().Add(5 * time.Second)
	for st.totalOf("events") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no flush within 5 s of a 10 ms interval")
		}
		time.Sleep(5 * time.Millisecond) // polling the background flush
	}
	st.mu.Lock()
	st.refuse = true
	st.mu.Unlock()
	l.Count("acc", RouteStream)
	l.Count("acc", RouteStream)
	if err := l.Close(t.Context()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := st.totalOf("stream"); got != 2 {
		t.Errorf("after close: %d stream requests written, want 2", got)
	}
	if err := l.Close(t.Context()); err != nil {
		t.Errorf("a second close: %v", err)
	}

	off := newFlaky()
	lo := New(off, Options{Interval: time.Millisecond})
	lo.Start()
	lo.Count("acc", RouteKey)
	if err := lo.Close(t.Context()); err != nil {
		t.Fatalf("close of a ledger that does not count: %v", err)
	}
	if len(off.applied) != 0 {
		t.Errorf("a ledger that does not count wrote %v", off.total)
	}
	rows, err := lo.List(t.Context(), store.UsageQuery{AccountID: "acc", Route: "key"})
	if err != nil || len(rows) != 1 || rows[0].AccountID != "acc" {
		t.Errorf("List: %v, %v; want the store's one row", rows, err)
	}
}

// TestLedgerSweep: a sweep runs at most once per sweepEvery, a failed one
// is retried at the next chance.
func TestLedgerSweep(t *testing.T) {
	st := newFlaky()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var log logBuffer
	l := New(st, Options{Count: true, Interval: time.Second, Log: slog.New(slog.NewTextHandler(&log, nil)), Now: func() time.Time { return now }})
	st.sweepErr = errors.New("connection refused")
	l.sweep(t.Context())
	st.sweepErr = nil
	l.sweep(t.Context())
	l.sweep(t.Context())
	if st.sweeps != 2 {
		t.Fatalf("after a failed sweep and two within the hour: %d sweeps, want 2", st.sweeps)
	}
	now = now.Add(sweepEvery)
	l.sweepInBackground()
	deadline := time.Now().Add(5 * time.Second)
	for l.sweeping.Load() || func() bool { st.mu.Lock(); defer st.mu.Unlock(); return st.sweeps != 3 }() {
		if time.Now().After(deadline) {
			t.Fatal("no background sweep an hour later")
		}
		time.Sleep(5 * time.Millisecond) // polling the background sweep
	}
	for _, want := range []string{"usage past retention not swept", "usage past retention swept"} {
		if !log.contains(want) {
			t.Errorf("log %q: no %q", log.String(), want)
		}
	}
}

// TestCountsByDay: a count lands on the UTC day of the ledger's clock when
// it was made.
func TestCountsByDay(t *testing.T) {
	st := newFlaky()
	now := time.Date(2026, 3, 1, 23, 59, 59, 0, time.UTC)
	l := New(st, Options{Count: true, Interval: time.Second, Now: func() time.Time { return now }})
	l.Count("acc", RouteKey)
	now = now.Add(2 * time.Second)
	l.Count("acc", RouteKey)
	l.Count("other", RouteKey)
	if err := l.flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[time.Time]int64{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC): 1, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC): 2}
	for d, n := range want {
		if st.days[d] != n {
			t.Errorf("day %s: %d, want %d (all %v)", d.Format(time.DateOnly), st.days[d], n, st.days)
		}
	}
}

// TestRoutes: every route's name parses back to it; anything else is
// refused.
func TestRoutes(t *testing.T) {
	for r := RouteKey; r <= RouteCandles; r++ {
		if got, ok := ParseRoute(r.String()); !ok || got != r {
			t.Errorf("ParseRoute(%q) = %v, %v; want %v", r.String(), got, ok, r)
		}
	}
	for _, name := range []string{"", "prices", "Key", "key "} {
		if _, ok := ParseRoute(name); ok {
			t.Errorf("ParseRoute(%q) accepted", name)
		}
	}
}

// TestUTCDay: the day number changes at midnight UTC, whatever the zone
// of the time given.
func TestUTCDay(t *testing.T) {
	zone := time.FixedZone("UTC-5", -5*3600)
	mid := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if a, b := utcDay(mid.Add(-time.Nanosecond)), utcDay(mid); b != a+1 {
		t.Errorf("across midnight: %d then %d", a, b)
	}
	if got := Day(mid.Add(3 * time.Hour).In(zone)); !got.Equal(mid) {
		t.Errorf("Day(03:00Z in UTC-5) = %s, want %s", got, mid)
	}
	if got := Day(time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC)); !got.Equal(time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("before 1970: %s", got)
	}
}

// BenchmarkUsageCount is the counting every admitted request pays: one
// account on one route from every core (the worst case for the shards).
func BenchmarkUsageCount(b *testing.B) {
	u := newTally()
	day := utcDay(time.Now())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u.add("acc_0123456789abcdef", day, RouteSnapshot)
		}
	})
}

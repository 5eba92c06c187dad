package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// flakyUsage is a UsageStore that refuses or loses answers on demand and
// applies each batch id once, as store.Store does.
type flakyUsage struct {
	applied map[string]bool
	total   map[string]int64 // route → count
	// refuse fails the next call without applying; ambiguous applies the
	// next batch and still reports a failure (a commit whose answer was
	// lost).
	refuse, ambiguous bool
}

func (f *flakyUsage) AddUsage(_ context.Context, id string, counts []store.UsageCount) (bool, error) {
	if f.refuse {
		f.refuse = false
		return false, errors.New("connection refused")
	}
	if !f.applied[id] {
		f.applied[id] = true
		for _, c := range counts {
			f.total[c.Route] += c.Count
		}
	}
	if f.ambiguous {
		f.ambiguous = false
		return true, errors.New("connection reset after commit")
	}
	return true, nil
}

func (f *flakyUsage) Usage(context.Context, store.UsageQuery) ([]store.UsageCount, error) {
	return nil, nil
}

func (f *flakyUsage) SweepUsage(context.Context, time.Time) (int64, error) { return 0, nil }

// TestUsageFlushRetries: a failed flush keeps its counts and the next one
// writes them with what was counted since; a batch whose commit was not
// heard of is retried under its id, so it is not added twice.
func TestUsageFlushRetries(t *testing.T) {
	st := &flakyUsage{applied: map[string]bool{}, total: map[string]int64{}}
	f := newUsageFlusher(st, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	day := utcDay(time.Now())
	add := func(n int) {
		for range n {
			f.counter.add("acc", day, 0)
		}
	}
	flush := func(wantErr bool) {
		t.Helper()
		if err := f.flush(t.Context()); (err != nil) != wantErr {
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

// TestUTCDay: the day number changes at midnight UTC, whatever the zone
// of the time given.
func TestUTCDay(t *testing.T) {
	zone := time.FixedZone("UTC-5", -5*3600)
	mid := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if a, b := utcDay(mid.Add(-time.Nanosecond)), utcDay(mid); b != a+1 {
		t.Errorf("across midnight: %d then %d", a, b)
	}
	if got := dayTime(utcDay(mid.Add(3 * time.Hour).In(zone))); !got.Equal(mid) {
		t.Errorf("dayTime(utcDay(03:00Z in UTC-5)) = %s, want %s", got, mid)
	}
	if got := dayTime(utcDay(time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC))); !got.Equal(time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("before 1970: %s", got)
	}
}

// BenchmarkUsageCount is the counting every admitted request pays: one
// account on one route from every core (the worst case for the shards).
func BenchmarkUsageCount(b *testing.B) {
	u := newUsageCounter()
	day := utcDay(time.Now())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u.add("acc_0123456789abcdef", day, 4)
		}
	})
}

package search

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

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

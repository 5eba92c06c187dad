package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// The listing page script (listPage), run the way an API node runs it:
// queued on a pipeline (QueueListPage), read back with ParseListPage.

// listPage runs one page of set after after on its own pipeline.
func listPage(t *testing.T, c *cache.Cache, rdb *redis.Client, set, after string, count int) ([]string, [][]byte, error) {
	t.Helper()
	ctx := context.Background()
	p := rdb.Pipeline()
	cmd := c.QueueListPage(p, set, after, count)
	p.Exec(ctx) //nolint:errcheck // ParseListPage reads the command's own error
	return c.ParseListPage(ctx, cmd, set, after, count)
}

// markComplete sets the marker a finished rebuild leaves (Rebuild needs the
// store; the marker is all the page script looks at).
func markComplete(t *testing.T, rdb *redis.Client) {
	t.Helper()
	if err := rdb.Set(context.Background(), "md:{i}:ok", cache.ListingLayout, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestListPageNeedsCompleteListing: until a rebuild has marked the listing
// complete, the page script answers "incomplete" (the caller reads the
// store), even for a set that has members: after Redis lost its data, the
// sets hold only what ingest wrote since.
func TestListPageNeedsCompleteListing(t *testing.T) {
	c, rdb, _ := miniCache(t)
	ctx := context.Background()
	applyEvent(t, c, 1, activeEvent("ev", "politics", map[string]string{"a": "A", "b": "B"}))
	if _, _, err := listPage(t, c, rdb, "*:*:1", "", 10); !errors.Is(err, cache.ErrListingIncomplete) {
		t.Errorf("page before the marker: got %v, want ErrListingIncomplete", err)
	}
	if ok, err := c.ListingComplete(ctx); ok || err != nil {
		t.Errorf("ListingComplete before the marker: %v, %v", ok, err)
	}
	p := rdb.Pipeline()
	complete := c.QueueComplete(p)
	if _, err := p.Exec(ctx); err != nil || complete.Val() != 0 {
		t.Errorf("QueueComplete before the marker: %d, %v; want 0", complete.Val(), err)
	}

	markComplete(t, rdb)
	ids, sums, err := listPage(t, c, rdb, "*:*:1", "", 10)
	if err != nil || !slices.Equal(ids, []string{"ev"}) || len(sums) != 1 || !strings.Contains(string(sums[0]), `"universal_id":"ev"`) {
		t.Errorf("page after the marker: %q %s %v", ids, sums, err)
	}
	if ok, err := c.ListingComplete(ctx); !ok || err != nil {
		t.Errorf("ListingComplete after the marker: %v, %v", ok, err)
	}
	// An empty set is an empty page of a complete listing, not "incomplete".
	if ids, sums, err := listPage(t, c, rdb, "sports:*:1", "", 10); err != nil || len(ids) != 0 || len(sums) != 0 {
		t.Errorf("empty set: %q %s %v", ids, sums, err)
	}
}

// TestListPageWalk: walking a set page by page (each page after the last
// id of the one before) gives every member once, in bytewise id order, each
// with its own summary, for any page size.
func TestListPageWalk(t *testing.T) {
	c, rdb, _ := miniCache(t)
	ids := []string{"-y", "0", "09", "9", "A", "Z", "Za", "_x", "a", "a-", "a0", "aA", "a_", "b", "E-10", "E-9", "z", "zz"}
	var res store.Result
	var wantC []string
	for i, id := range ids {
		v := map[string]string{"a": "A", "b": "B"}
		if i%3 == 0 {
			v["c"] = "C"
			wantC = append(wantC, id)
		}
		res.Events = append(res.Events, store.EventDoc{ID: id, Rev: int64(i + 1), Event: activeEvent(id, "politics", v)})
	}
	// Not served (one venue): in no set.
	res.Events = append(res.Events, store.EventDoc{ID: "b1", Rev: 100, Event: activeEvent("b1", "politics", map[string]string{"a": "A"})})
	apply(t, c, &res)
	markComplete(t, rdb)

	for _, tt := range []struct {
		set   string
		count int
		want  []string
	}{
		{"*:*:1", 4, sorted(ids)},
		{"*:*:1", 1, sorted(ids)},
		{"*:*:1", 100, sorted(ids)},
		{"politics:venue_c:3", 2, sorted(wantC)},
		{"sports:*:1", 5, nil},
	} {
		t.Run(fmt.Sprintf("%s/%d", tt.set, tt.count), func(t *testing.T) {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				page, sums, err := listPage(t, c, rdb, tt.set, after, tt.count)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > tt.count || len(sums) != len(page) || pages > len(ids) {
					t.Fatalf("page after %q: %d ids, %d summaries, count %d", after, len(page), len(sums), tt.count)
				}
				for i, s := range sums {
					if !strings.Contains(string(s), `"universal_id":"`+page[i]+`"`) {
						t.Errorf("summary of %s: got %s", page[i], s)
					}
				}
				got = append(got, page...)
				if len(page) < tt.count {
					break
				}
				after = page[len(page)-1]
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestListPageMissingSummary: an id whose summary is gone (a rebuild
// pruning it at that moment) comes back with a nil summary and still counts
// for the page, so a walk does not end early.
func TestListPageMissingSummary(t *testing.T) {
	c, rdb, _ := miniCache(t)
	var res store.Result
	for i, id := range []string{"a", "b", "c", "d"} {
		res.Events = append(res.Events, store.EventDoc{ID: id, Rev: int64(i + 1), Event: activeEvent(id, "politics", map[string]string{"a": "A", "b": "B"})})
	}
	apply(t, c, &res)
	markComplete(t, rdb)
	if err := rdb.HDel(context.Background(), "md:{i}:s", "b").Err(); err != nil {
		t.Fatal(err)
	}
	ids, sums, err := listPage(t, c, rdb, "*:*:1", "", 2)
	if err != nil || !slices.Equal(ids, []string{"a", "b"}) || len(sums) != 2 || sums[0] == nil || sums[1] != nil {
		t.Fatalf("first page: %q %q %v; want a with its summary, b with none", ids, sums, err)
	}
	ids, _, err = listPage(t, c, rdb, "*:*:1", "b", 2)
	if err != nil || !slices.Equal(ids, []string{"c", "d"}) {
		t.Errorf("second page: %q %v; want c, d", ids, err)
	}
}

// TestListPageAfterScriptFlush: when Redis lost the script, the queued page
// fails with NOSCRIPT and ParseListPage runs it again by itself.
func TestListPageAfterScriptFlush(t *testing.T) {
	c, rdb, _ := miniCache(t)
	applyEvent(t, c, 1, activeEvent("ev", "politics", map[string]string{"a": "A", "b": "B"}))
	markComplete(t, rdb)
	if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	ids, sums, err := listPage(t, c, rdb, "*:*:1", "", 10)
	if err != nil || !slices.Equal(ids, []string{"ev"}) || len(sums) != 1 {
		t.Errorf("page after SCRIPT FLUSH: %q %s %v", ids, sums, err)
	}
}

// TestListPageRedisDown: with Redis gone the page is an error that names
// the set, not an empty page or "incomplete".
func TestListPageRedisDown(t *testing.T) {
	c, rdb, mr := miniCache(t)
	mr.Close()
	_, _, err := listPage(t, c, rdb, "*:*:1", "", 10)
	if err == nil || errors.Is(err, cache.ErrListingIncomplete) || !strings.Contains(err.Error(), "*:*:1") {
		t.Errorf("page with Redis down: got %v, want an error naming the set", err)
	}
}

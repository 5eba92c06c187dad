package cache_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// The filtered listing page (listFiltered), run as an API node runs it, on
// miniredis: what ingest keeps in {i}:m, the walk with its scan bound, and
// the layout marker it needs.

// filteredPage runs one filtered page on its own pipeline.
func filteredPage(t *testing.T, c *cache.Cache, rdb *redis.Client, set string, f store.MatchFilter, after string, count, scan int) ([]string, [][]byte, string, error) {
	t.Helper()
	ctx := context.Background()
	p := rdb.Pipeline()
	cmd := c.QueueFilteredPage(p, set, f, after, count, scan)
	p.Exec(ctx) //nolint:errcheck // ParseFilteredPage reads the command's own error
	return c.ParseFilteredPage(ctx, cmd, set, f, after, count, scan)
}

// linkedEvent is an active event on venues (letters a–d) with metadata
// on each: relation and confidence, or none where rels holds "".
func linkedEvent(id, venuesOn string, rels []string, confs []float64) *store.Event {
	ids := map[string]string{}
	for _, v := range venuesOn {
		ids[string(v)] = strings.ToUpper(string(v)) + "-" + id
	}
	e := activeEvent(id, "politics", ids)
	for k, v := range venuesOn {
		if rels[k] != "" {
			e.Matches[v-'a'] = m(rels[k], confs[k], "rules")
		}
	}
	return e
}

// TestListingLinks: ingest keeps, beside each listed event whose every link
// has metadata, its least confidence and shared relation; an event that
// loses metadata on a link, or leaves the listing, loses its field.
func TestListingLinks(t *testing.T) {
	c, rdb, _ := miniCache(t)
	ident, comp := store.RelationIdentity, store.RelationComplement
	events := []*store.Event{
		linkedEvent("e1", "ab", []string{ident, ident}, []float64{0.9, 1}),
		linkedEvent("e2", "abc", []string{ident, comp, ident}, []float64{0.75, 0.5, 0.8}),
		linkedEvent("e3", "ab", []string{ident, ""}, []float64{1, 0}),
		linkedEvent("e4", "cd", []string{"", ""}, nil),
		linkedEvent("e5", "bd", []string{ident, ident}, []float64{1e-7, 0.1}),
		linkedEvent("e6", "ab", []string{comp, comp}, []float64{0, 0.3}),
	}
	var res store.Result
	for i, e := range events {
		res.Events = append(res.Events, store.EventDoc{ID: e.ID, Rev: int64(i + 1), Event: e})
	}
	apply(t, c, &res)
	want := map[string]string{"e1": "0.9 identity", "e2": "0.5 -", "e5": "1e-07 identity", "e6": "0 complement"}
	if got := hash(t, rdb, "md:{i}:m"); !maps.Equal(got, want) {
		t.Errorf("{i}:m = %v, want %v", got, want)
	}

	// e1 loses venue_b's metadata; e2 becomes all identity; e5 resolves.
	e1 := linkedEvent("e1", "ab", []string{ident, ""}, []float64{0.9, 0})
	e2 := linkedEvent("e2", "abc", []string{ident, ident, ident}, []float64{0.75, 0.5, 0.8})
	e5 := linkedEvent("e5", "bd", []string{ident, ident}, []float64{1e-7, 0.1})
	e5.Status = store.StatusResolved
	applyEvent(t, c, 10, e1)
	applyEvent(t, c, 11, e2)
	applyEvent(t, c, 12, e5)
	want = map[string]string{"e2": "0.5 identity", "e6": "0 complement"}
	if got := hash(t, rdb, "md:{i}:m"); !maps.Equal(got, want) {
		t.Errorf("after the changes {i}:m = %v, want %v", got, want)
	}
}

// filterWorld lists 40 events whose links vary with their index: no
// metadata, a link without it, identity or mixed relations, confidences
// from 0 to 1 in steps of 0.1 (ties included).
func filterWorld(t *testing.T) (*cache.Cache, *redis.Client, []*store.Event) {
	t.Helper()
	c, rdb, _ := miniCache(t)
	var res store.Result
	var events []*store.Event
	for i := range 40 {
		id := fmt.Sprintf("ev%02d", i)
		conf := float64(i%11) / 10
		var e *store.Event
		switch i % 5 {
		case 0:
			e = linkedEvent(id, "ab", []string{"", ""}, nil)
		case 1:
			e = linkedEvent(id, "abc", []string{"identity", "", "identity"}, []float64{1, 0, 1})
		case 2, 3:
			e = linkedEvent(id, "abd", []string{"identity", "identity", "identity"}, []float64{conf, 1, conf + 0.05})
		case 4:
			e = linkedEvent(id, "bc", []string{"identity", "complement"}, []float64{1, conf})
		}
		events = append(events, e)
		res.Events = append(res.Events, store.EventDoc{ID: id, Rev: 1, Event: e})
	}
	apply(t, c, &res)
	markComplete(t, rdb)
	return c, rdb, events
}

// passing lists the ids of events f keeps, ascending.
func passing(events []*store.Event, f store.MatchFilter, venue int) []string {
	var out []string
	for _, e := range events {
		if f.Passes(e.Links()) && (venue < 0 || e.VenueIDs[venue] != nil) {
			out = append(out, e.ID)
		}
	}
	return sorted(out)
}

// TestFilteredPageWalk: walking a set with a filter, page by page (after
// the last id of a full page, or after where a bounded walk stopped),
// yields exactly the events the filter keeps, in order, whatever the page
// size and scan bound; a page never holds more than asked for nor
// examines more than the bound; only a walk the bound stopped resumes.
func TestFilteredPageWalk(t *testing.T) {
	c, rdb, events := filterWorld(t)
	for _, f := range []store.MatchFilter{
		{MinConfidence: 0.5}, {MinConfidence: 0.3, Relation: "identity"}, {Relation: "identity"},
		{MinConfidence: 1}, {MinConfidence: 0.05}, {Relation: "complement"},
	} {
		for _, set := range []struct {
			name  string
			venue int
		}{{"*:*:1", -1}, {"*:venue_d:1", 3}} {
			want := passing(events, f, set.venue)
			for _, count := range []int{1, 3, 50} {
				for _, scan := range []int{1, 4, 7, 1000} {
					name := fmt.Sprintf("%v/%s/count %d/scan %d", f, set.name, count, scan)
					var got []string
					after := ""
					for pages := 0; ; pages++ {
						ids, sums, resume, err := filteredPage(t, c, rdb, set.name, f, after, count, scan)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if len(ids) > count || len(sums) != len(ids) || pages > 100 {
							t.Fatalf("%s: page after %q: %d ids, %d summaries", name, after, len(ids), len(sums))
						}
						for i, s := range sums {
							if !strings.Contains(string(s), `"universal_id":"`+ids[i]+`"`) {
								t.Fatalf("%s: summary of %s: %s", name, ids[i], s)
							}
						}
						if examined := examinedBetween(events, set.venue, after, resume); resume != "" && examined > scan {
							t.Fatalf("%s: page after %q examined %d events, bound %d", name, after, examined, scan)
						}
						got = append(got, ids...)
						switch {
						case len(ids) == count:
							if resume != "" {
								t.Fatalf("%s: a full page resumes at %q", name, resume)
							}
							after = ids[len(ids)-1]
							continue
						case resume != "":
							if len(ids) > 0 && resume < ids[len(ids)-1] {
								t.Fatalf("%s: resume %q before the page's last id %q", name, resume, ids[len(ids)-1])
							}
							after = resume
							continue
						}
						break
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s: walked %q, want %q", name, got, want)
					}
				}
			}
		}
	}
}

// examinedBetween counts the set's events in (after, end].
func examinedBetween(events []*store.Event, venue int, after, end string) int {
	n := 0
	for _, e := range events {
		if e.ID > after && e.ID <= end && (venue < 0 || e.VenueIDs[venue] != nil) {
			n++
		}
	}
	return n
}

// TestFilteredPageBounds: a filter that keeps nothing answers an empty
// page, and no resume when the set ends within the bound; a page boundary
// inside a run of events the filter drops resumes where the walk stopped,
// and the next page starts above it.
func TestFilteredPageBounds(t *testing.T) {
	c, rdb, _ := filterWorld(t)
	none := store.MatchFilter{MinConfidence: 1, Relation: "complement"}
	ids, sums, resume, err := filteredPage(t, c, rdb, "*:*:1", none, "", 10, 1000)
	if err != nil || len(ids) != 0 || len(sums) != 0 || resume != "" {
		t.Errorf("a filter that keeps nothing: %q %q resume %q, %v; want an empty page, no resume", ids, sums, resume, err)
	}
	ids, _, resume, err = filteredPage(t, c, rdb, "*:*:1", none, "", 10, 40)
	if err != nil || len(ids) != 0 || resume != "ev39" {
		t.Errorf("a bound equal to the set: %q resume %q, %v; want nothing, resume ev39", ids, resume, err)
	}
	// ev02 and ev03 keep identity; ev04..ev06 do not; ev07 does.
	ident := store.MatchFilter{Relation: "identity"}
	ids, _, resume, err = filteredPage(t, c, rdb, "*:*:1", ident, "ev01", 3, 4)
	if err != nil || !slices.Equal(ids, []string{"ev02", "ev03"}) || resume != "ev05" {
		t.Errorf("after ev01, bound 4: %q resume %q, %v; want [ev02 ev03], resume ev05", ids, resume, err)
	}
	ids, _, resume, err = filteredPage(t, c, rdb, "*:*:1", ident, "ev05", 3, 4)
	if err != nil || !slices.Equal(ids, []string{"ev07", "ev08"}) || resume != "ev09" {
		t.Errorf("after ev05, bound 4: %q resume %q, %v; want [ev07 ev08], resume ev09", ids, resume, err)
	}
	// A malformed field is an event that fails, not an error.
	if err := rdb.HSet(context.Background(), "md:{i}:m", "ev02", "x", "ev03", "0.5identity").Err(); err != nil {
		t.Fatal(err)
	}
	ids, _, _, err = filteredPage(t, c, rdb, "*:*:1", ident, "ev01", 3, 4)
	if err != nil || len(ids) != 0 {
		t.Errorf("malformed fields: %q, %v; want both skipped", ids, err)
	}
}

// TestFilteredPageNeedsLayout: a listing marked whole by an older release
// lacks {i}:m: a filtered page answers "incomplete" (the caller reads the
// store), an unfiltered one does not; and EnsureComplete rebuilds it.
func TestFilteredPageNeedsLayout(t *testing.T) {
	c, rdb, _ := filterWorld(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, "md:{i}:ok", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	f := store.MatchFilter{MinConfidence: 0.5}
	if _, _, _, err := filteredPage(t, c, rdb, "*:*:1", f, "", 10, 1000); !errors.Is(err, cache.ErrListingIncomplete) {
		t.Errorf("filtered page on an old layout: %v, want ErrListingIncomplete", err)
	}
	if ids, _, err := listPage(t, c, rdb, "*:*:1", "", 10); err != nil || len(ids) != 10 {
		t.Errorf("unfiltered page on an old layout: %d ids, %v; want 10", len(ids), err)
	}
	src := &failingSource{}
	if _, _, err := c.EnsureComplete(ctx, src); !errors.Is(err, errSnapshot) || src.snapshots != 1 {
		t.Errorf("EnsureComplete on an old layout: %v after %d snapshots; want a rebuild", err, src.snapshots)
	}
	if ok, err := c.ListingComplete(ctx); !ok || err != nil {
		t.Errorf("ListingComplete on an old layout: %v, %v; want true (its sets are whole)", ok, err)
	}
}

// TestFilteredPageAfterScriptFlush: a lost script is run again directly.
func TestFilteredPageAfterScriptFlush(t *testing.T) {
	c, rdb, events := filterWorld(t)
	if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	f := store.MatchFilter{MinConfidence: 0.5}
	ids, _, _, err := filteredPage(t, c, rdb, "*:*:1", f, "", 100, 1000)
	if want := passing(events, f, -1); err != nil || !slices.Equal(ids, want) {
		t.Errorf("page after SCRIPT FLUSH: %q, %v; want %q", ids, err, want)
	}
}

// TestFilteredPageRedisDown: an error naming the set.
func TestFilteredPageRedisDown(t *testing.T) {
	c, rdb, mr := miniCache(t)
	mr.Close()
	_, _, _, err := filteredPage(t, c, rdb, "*:*:1", store.MatchFilter{Relation: "identity"}, "", 10, 10)
	if err == nil || errors.Is(err, cache.ErrListingIncomplete) || !strings.Contains(err.Error(), "*:*:1") {
		t.Errorf("filtered page with Redis down: got %v, want an error naming the set", err)
	}
}

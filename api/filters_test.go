package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/ingest"
)

// The match filters of /events and /markets/search (contract §3 "Match
// metadata"): min_confidence and relation=identity, on two nodes, against
// the model; bound into the cursor; bad values refused with what was
// wrong; and the listing's scan bound, which makes short pages that go on.

// fxLinks gives the listed event at position i (of the model's listing)
// match metadata by i%6: 0 none; 1 all identity, the first link 0.9 sure;
// 2 all identity, the first 0.3; 3 the first complement, all 0.95; 4 the
// first without metadata, the others identity 1; 5 all identity 1.
func fxLinks(i int, e *ingest.EventMsg) ingest.MatchesMsg {
	if i%6 == 0 {
		return nil
	}
	out := ingest.MatchesMsg{}
	first := true
	for k, v := range rtVenues(e) {
		if v == nil {
			continue
		}
		rel, conf := "identity", 1.0
		switch i % 6 {
		case 1:
			if first {
				conf = 0.9
			}
		case 2:
			if first {
				conf = 0.3
			}
		case 3:
			conf = 0.95
			if first {
				rel = "complement"
			}
		}
		if i%6 == 4 && first {
			out[rtVenueNames[k]] = nil
		} else {
			out[rtVenueNames[k]] = &ingest.MatchMsg{Relation: &rel, Confidence: &conf, Method: ptrTo("rules")}
		}
		first = false
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// filtersSetup is the route tests' fixture on n nodes, then match metadata
// on most listed events (fxLinks; E-main none), served by every node.
func filtersSetup(t *testing.T, n int, opts ...option) (*world, []*node, string) {
	t.Helper()
	w, nodes, secret := rtSetup(t, n, opts...)
	for i, id := range w.model.listed(rtFilter{}) {
		links := fxLinks(i, w.model.events[id])
		if id == "E-main" || links == nil {
			continue
		}
		republishEvent(t, w, id, func(e *ingest.EventMsg) { e.Matches = links })
	}
	w.applied(t)
	for i, nd := range nodes {
		eventually(t, fmt.Sprintf("node %d serves the metadata", i), func() string {
			want := w.model.listed(rtFilter{relation: "identity"})
			if got, _ := fxWalk(t, nd, secret, "limit=100&relation=identity", "", 100); !slices.Equal(got, want) {
				return fmt.Sprintf("listing %q, want %q", got, want)
			}
			want = w.model.searchWith("", 50, rtFilter{minConf: 0.5})
			if got := rtIDs(t, nd.get(t, "/public/v1/markets/search?limit=50&min_confidence=0.5", secret), "universal_id"); !slices.Equal(got, want) {
				return fmt.Sprintf("search %q, want %q", got, want)
			}
			return ""
		})
	}
	return w, nodes, secret
}

// fxWalk follows an /events walk from query (and cursor, "" for the
// start) to its null cursor, and counts the pages before the last that hold
// fewer than limit items (a filtered page's read may stop on its scan
// bound).
func fxWalk(t *testing.T, n *node, secret, query, cursor string, limit int) (ids []string, short int) {
	t.Helper()
	for page := 0; ; page++ {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		p := rtDecodePage(t, n.get(t, "/public/v1/events?"+q, secret))
		for _, raw := range p.Data {
			var it struct {
				ID string `json:"universal_id"`
			}
			if err := json.Unmarshal(raw, &it); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, it.ID)
		}
		if p.NextCursor == nil {
			return ids, short
		}
		if len(p.Data) < limit {
			short++
		}
		if page > 100 {
			t.Fatalf("%s: more than 100 pages", query)
		}
		cursor = *p.NextCursor
	}
}

// republishEvent publishes the model's event id at its next version,
// changed by change.
func republishEvent(t *testing.T, w *world, id string, change func(*ingest.EventMsg)) {
	t.Helper()
	ev := *w.model.events[id]
	v := *ev.Version + 1
	ev.Version = &v
	change(&ev)
	w.publish(t, "event", id, ev)
}

// fxFilters are filters with what they mean; some are one filter written
// two ways.
var fxFilters = []struct {
	query string
	f     rtFilter
}{
	{"min_confidence=0.5", rtFilter{minConf: 0.5}},
	{"min_confidence=5e-1", rtFilter{minConf: 0.5}},
	{"min_confidence=0.9", rtFilter{minConf: 0.9}},
	{"min_confidence=0.90000000000000001", rtFilter{minConf: 0.9}},
	{"min_confidence=0.95", rtFilter{minConf: 0.95}},
	{"min_confidence=1", rtFilter{minConf: 1}},
	{"min_confidence=1e-400", rtFilter{minConf: 5e-324}},
	{"min_confidence=0", rtFilter{}},
	{"relation=identity", rtFilter{relation: "identity"}},
	{"relation=identity&min_confidence=0.95", rtFilter{relation: "identity", minConf: 0.95}},
	{"relation=identity&category=politics&venue=venue_c&min_venues=3", rtFilter{relation: "identity", category: "politics", venue: "venue_c", min: 3}},
	{"min_confidence=0.5&category=crypto", rtFilter{minConf: 0.5, category: "crypto"}},
	{"relation=identity&category=econ", rtFilter{relation: "identity", category: "econ"}},
}

// TestEventsMatchFilters: every filter walks exactly the events the model
// keeps, on both nodes alike; the fixture makes each filter keep some and
// drop some.
func TestEventsMatchFilters(t *testing.T) {
	w, nodes, secret := filtersSetup(t, 2)
	all := w.model.listed(rtFilter{})
	for _, tc := range fxFilters {
		want := w.model.listed(tc.f)
		if tc.f.category == "" && tc.f.minConf+float64(len(tc.f.relation)) > 0 && (len(want) == 0 || len(want) == len(all)) {
			t.Errorf("%s: the fixture keeps %d of %d events; want some kept and some not", tc.query, len(want), len(all))
		}
		for i, n := range nodes {
			for _, limit := range []string{"4", "100"} {
				if got := rtWalk(t, w, n, secret, tc.query+"&limit="+limit); !slices.Equal(got, want) {
					t.Errorf("node %d, %s, limit %s:\n got %q\nwant %q", i, tc.query, limit, got, want)
				}
			}
		}
		a, b := nodes[0].get(t, "/public/v1/events?limit=4&"+tc.query, secret), nodes[1].get(t, "/public/v1/events?limit=4&"+tc.query, secret)
		if string(a.body) != string(b.body) || a.header.Get("ETag") != b.header.Get("ETag") {
			t.Errorf("%s: the nodes answer %s (%s) and %s (%s)", tc.query, a.body, a.header.Get("ETag"), b.body, b.header.Get("ETag"))
		}
	}
	// Every event filtered out: no data, no cursor.
	if kept := w.model.listed(rtFilter{relation: "identity", category: "econ"}); len(kept) != 0 || len(w.model.listed(rtFilter{category: "econ"})) == 0 {
		t.Fatalf("model: econ holds no event, or identity keeps %q of it", kept)
	}
	p := rtDecodePage(t, nodes[1].get(t, "/public/v1/events?relation=identity&category=econ", secret))
	if len(p.Data) != 0 || p.NextCursor != nil {
		t.Errorf("a filter that keeps nothing: %d items, cursor %v; want none and null", len(p.Data), p.NextCursor)
	}

	// Without the whole listing in Redis, Postgres answers the same walks
	// (pages of a size not read before, so none is held).
	marker := w.prefix + "{i}:ok"
	layout, err := w.rdb.GetDel(t.Context(), marker).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := nodes[0]
	before := n.counter(t, "marketdata_reads_total", "resource", "page", "layer", "store")
	for _, tc := range fxFilters {
		if got, short := fxWalk(t, n, secret, tc.query+"&limit=5", "", 5); !slices.Equal(got, w.model.listed(tc.f)) || short != 0 {
			t.Errorf("from Postgres, %s: %q (%d short pages), want %q", tc.query, got, short, w.model.listed(tc.f))
		}
	}
	if n.counter(t, "marketdata_reads_total", "resource", "page", "layer", "store") == before {
		t.Error("no page read from Postgres")
	}
	if err := w.rdb.Set(t.Context(), marker, layout, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestEventsMatchFilterCursor: the match filters are bound into the cursor
// like the others: a cursor replayed with another filter, or without one,
// is refused; one number written two ways, and min_confidence 0 and
// absent, are one filter; limit is not bound.
func TestEventsMatchFilterCursor(t *testing.T) {
	w, nodes, secret := filtersSetup(t, 2)
	cursorOf := func(query string) string {
		t.Helper()
		p := rtDecodePage(t, nodes[0].get(t, "/public/v1/events?limit=2&"+query, secret))
		if p.NextCursor == nil {
			t.Fatalf("%s: no next page", query)
		}
		return url.QueryEscape(*p.NextCursor)
	}
	for _, tc := range []struct {
		issued, replayed string
		ok               bool
	}{
		{"min_confidence=0.5", "min_confidence=5e-1&limit=3", true},
		{"min_confidence=0.5", "min_confidence=0.6", false},
		{"min_confidence=0.5", "", false},
		{"min_confidence=0.5", "min_confidence=0.5&relation=identity", false},
		{"relation=identity", "relation=identity", true},
		{"relation=identity", "", false},
		{"relation=identity", "min_confidence=0", false},
		{"", "min_confidence=0", true},
		{"min_confidence=0", "", true},
		{"relation=identity&min_confidence=0.9", "min_confidence=0.9&relation=identity", true},
		{"relation=identity&min_confidence=0.9", "min_confidence=0.9", false},
	} {
		cur := cursorOf(tc.issued)
		a := nodes[1].get(t, "/public/v1/events?cursor="+cur+"&"+tc.replayed, secret)
		if !tc.ok {
			wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", "cursor")
			continue
		}
		f := fxFilterOf(t, tc.replayed)
		want := w.model.listed(f)
		if len(want) < 3 {
			t.Fatalf("%s: the model lists %d", tc.replayed, len(want))
		}
		if got := rtIDs(t, a, "universal_id"); len(got) == 0 || got[0] != want[2] {
			t.Errorf("cursor of %q replayed with %q: %q, want it to start at %s", tc.issued, tc.replayed, got, want[2])
		}
	}
}

// fxFilterOf is the rtFilter of a query of fxFilters (or "").
func fxFilterOf(t *testing.T, query string) rtFilter {
	t.Helper()
	var f rtFilter
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "min_confidence":
			if _, err := fmt.Sscan(v, &f.minConf); err != nil {
				t.Fatal(err)
			}
		case "relation":
			f.relation = v
		}
	}
	return f
}

// TestMatchFilterRefusals: bad values answer 422 invalid_request naming the
// parameter and what was wrong, on both routes, after the window check.
func TestMatchFilterRefusals(t *testing.T) {
	_, nodes, secret := rtSetup(t, 1)
	n := nodes[0]
	for _, tc := range []struct{ query, says string }{
		{"min_confidence=", "min_confidence is empty"},
		{"min_confidence", "min_confidence is empty"},
		{"min_confidence=abc", "min_confidence is not a number"},
		{"min_confidence=NaN", "min_confidence is not a number"},
		{"min_confidence=Infinity", "min_confidence is not a number"},
		{"min_confidence=0x1p-1", "min_confidence is not a number"},
		{"min_confidence=%200.5", "min_confidence is not a number"},
		{"min_confidence=1e400", "min_confidence is above 1"},
		{"min_confidence=1.5", "min_confidence is above 1"},
		{"min_confidence=-0.1", "min_confidence is below 0"},
		{"min_confidence=0." + strings.Repeat("0", 70) + "1", "min_confidence is longer than 64 characters"},
		{"relation=complement", "relation must be identity"},
		{"relation=IDENTITY", "relation must be identity"},
		{"relation=", "relation is empty"},
		{"relation", "relation is empty"},
		{"relation=identity&min_confidence=2", "min_confidence is above 1"},
	} {
		for _, route := range []string{"/public/v1/events?", "/public/v1/markets/search?q=e&"} {
			a := n.get(t, route+tc.query, secret)
			wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", tc.says)
			wantLimitHeaders(t, a, true)
		}
	}
}

// TestSearchMatchFilters: search keeps the events the model keeps, in the
// contract's order, on both nodes alike; an answer for one filter never
// answers another (the nodes keep rendered answers by query).
func TestSearchMatchFilters(t *testing.T) {
	w, nodes, secret := filtersSetup(t, 2)
	for round := range 2 {
		for _, tc := range append(fxFilters[:10:10], struct {
			query string
			f     rtFilter
		}{"", rtFilter{}}) {
			for _, q := range []string{"", "election", "who wins", "rate_"} {
				want := w.model.searchWith(q, 50, tc.f)
				var items []map[string]any
				for _, id := range want {
					items = append(items, w.model.summary(id))
				}
				var tags []string
				for _, n := range nodes {
					a := n.get(t, "/public/v1/markets/search?limit=50&q="+url.QueryEscape(q)+"&"+tc.query, secret)
					rtWantItems(t, a, items, rtSummaryKeys)
					tags = append(tags, a.header.Get("ETag"))
				}
				if tags[0] != tags[1] {
					t.Errorf("round %d, q %q, %s: ETags %q differ", round, q, tc.query, tags)
				}
			}
		}
	}
}

// TestEventsFilterScanBound: with a scan bound of 5 events a page, a
// filtered walk still visits exactly the events the filter keeps, through
// pages that hold fewer than asked for (none, even) and still go on; a
// filter that keeps none of the listing walks to a null cursor through
// empty pages; and metadata that changes between two pages shows in the
// later one, read on the other node.
func TestEventsFilterScanBound(t *testing.T) {
	w, nodes, secret := filtersSetup(t, 2, withFilterScan(5))
	walk := func(n *node, query string) ([]string, int) {
		t.Helper()
		return fxWalk(t, n, secret, query, "", 3)
	}
	for _, tc := range fxFilters {
		want := w.model.listed(tc.f)
		got, short := walk(nodes[0], tc.query+"&limit=3")
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.query, got, want)
		}
		if tc.f.category == "" && tc.f.relation != "" && short == 0 {
			t.Errorf("%s: no short page with a next cursor; the bound did not stop a walk", tc.query)
		}
	}
	// Unfiltered pages do not use the bound: always full until the last.
	if _, short := walk(nodes[1], "limit=3"); short != 0 {
		t.Errorf("unfiltered walk: %d short pages before the last", short)
	}
	// A filter that keeps none of a set larger than the bound: empty
	// pages with cursors, then a null one.
	query := ""
	for _, cat := range []string{"politics", "crypto", "sports-2"} {
		for _, venue := range rtVenueNames {
			f := rtFilter{category: cat, venue: venue, minConf: 1, relation: "identity"}
			if set := w.model.listed(rtFilter{category: cat, venue: venue}); query == "" && len(set) > 6 && len(w.model.listed(f)) == 0 {
				query = "category=" + cat + "&venue=" + venue + "&min_confidence=1&relation=identity&limit=3"
			}
		}
	}
	if query == "" {
		t.Fatal("the fixture has no set of more than 6 events that min_confidence=1&relation=identity empties")
	}
	if got, short := walk(nodes[1], query); len(got) != 0 || short == 0 {
		t.Errorf("%s: %q through %d empty pages with a cursor; want none through some", query, got, short)
	}

	// Metadata that changes between pages: the first page on node 0, a
	// change behind and one ahead of its cursor, the rest on node 1.
	f := rtFilter{relation: "identity"}
	before := w.model.listed(f)
	first := rtDecodePage(t, nodes[0].get(t, "/public/v1/events?relation=identity&limit=2", secret))
	if first.NextCursor == nil || len(first.Data) != 2 {
		t.Fatalf("first page: %d items, cursor %v", len(first.Data), first.NextCursor)
	}
	// The event that gains metadata is the last the filter drops: well
	// beyond the events the first page's read examined.
	all := w.model.listed(rtFilter{})
	var gains string
	for _, id := range all {
		if !slices.Contains(before, id) {
			gains = id
		}
	}
	republishEvent(t, w, before[0], func(e *ingest.EventMsg) { e.Matches = nil })
	republishEvent(t, w, gains, func(e *ingest.EventMsg) { e.Matches = fxLinks(5, e) })
	w.applied(t)
	after := w.model.listed(f)
	if slices.Contains(after, before[0]) || !slices.Contains(after, gains) {
		t.Fatalf("model after the changes: %q", after)
	}
	eventually(t, "node 1 serves the change", func() string {
		if got, _ := walk(nodes[1], "relation=identity&limit=100"); !slices.Equal(got, after) {
			return fmt.Sprintf("%q, want %q", got, after)
		}
		return ""
	})
	rest, _ := fxWalk(t, nodes[1], secret, "relation=identity&limit=3", *first.NextCursor, 3)
	var want []string
	for _, id := range after {
		if id > before[1] {
			want = append(want, id)
		}
	}
	if !slices.Equal(rest, want) || !slices.Contains(rest, gains) {
		t.Errorf("the walk's rest after the changes:\n got %q\nwant %q", rest, want)
	}
}

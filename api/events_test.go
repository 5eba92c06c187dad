package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
)

// rtPage is one /events answer.
type rtPage struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor *string           `json:"next_cursor"`
}

func rtDecodePage(t *testing.T, a answer) rtPage {
	t.Helper()
	rtWant200(t, a)
	if keys := rtKeys(t, a.body); !reflect.DeepEqual(keys, []string{"data", "next_cursor"}) {
		t.Errorf("keys = %q, want [data next_cursor]", keys)
	}
	var p rtPage
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// rtWalk follows next_cursor from query to the last page, checking every item
// and that only the last page has a null cursor.
func rtWalk(t *testing.T, w *world, n *node, secret, query string) []string {
	t.Helper()
	ids := []string{}
	cursor := ""
	for page := 0; ; page++ {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		a := n.get(t, "/public/v1/events?"+q, secret)
		p := rtDecodePage(t, a)
		for i, raw := range p.Data {
			var id struct {
				ID string `json:"universal_id"`
			}
			json.Unmarshal(raw, &id) //nolint:errcheck // checked by rtWantObject
			rtWantObject(t, "item "+strconv.Itoa(i), raw, w.model.summary(id.ID), rtSummaryKeys)
			ids = append(ids, id.ID)
		}
		if p.NextCursor == nil {
			return ids
		}
		if len(p.Data) == 0 || page > 100 {
			t.Fatalf("%s: page %d has %d items and a cursor", query, page, len(p.Data))
		}
		cursor = *p.NextCursor
	}
}

func TestEventList(t *testing.T) {
	w, nodes, secret := rtSetup(t, 1)
	n := nodes[0]
	all := w.model.listed(rtFilter{})
	if len(all) != 57 {
		t.Fatalf("fixture lists %d events, want 57", len(all))
	}
	for _, id := range []string{"solo", "mrg", "rsv"} {
		if slices.Contains(all, id) {
			t.Fatalf("model lists %s", id)
		}
	}

	t.Run("limits", func(t *testing.T) {
		for _, tc := range []struct {
			query string
			n     int
			next  bool
		}{
			{"", 50, true}, {"limit=1", 1, true}, {"limit=100", 57, false},
			{"limit=57", 57, false}, {"limit=56", 56, true}, {"limit=050", 50, true},
		} {
			p := rtDecodePage(t, n.get(t, "/public/v1/events?"+tc.query, secret))
			if len(p.Data) != tc.n || (p.NextCursor != nil) != tc.next {
				t.Errorf("%q: %d items, cursor %v; want %d, cursor %v", tc.query, len(p.Data), p.NextCursor != nil, tc.n, tc.next)
			}
		}
		for _, bad := range []string{"0", "101", "-1", "1.5", "abc", "", "+5", " 5", "1e2", "99999999999"} {
			a := n.get(t, "/public/v1/events?limit="+url.QueryEscape(bad), secret)
			wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", "limit")
			wantLimitHeaders(t, a, true)
		}
	})

	t.Run("filters", func(t *testing.T) {
		for _, tc := range []struct {
			query string
			f     rtFilter
		}{
			{"", rtFilter{}},
			{"min_venues=1", rtFilter{}},
			{"min_venues=2", rtFilter{}},
			{"min_venues=3", rtFilter{min: 3}},
			{"min_venues=4", rtFilter{min: 4}},
			{"category=politics", rtFilter{category: "politics"}},
			{"category=sports-2", rtFilter{category: "sports-2"}},
			{"category=nothing-here", rtFilter{category: "nothing-here"}},
			{"venue=venue_a", rtFilter{venue: "venue_a"}},
			{"venue=venue_d", rtFilter{venue: "venue_d"}},
			{"category=crypto&venue=venue_c&min_venues=3", rtFilter{category: "crypto", venue: "venue_c", min: 3}},
			{"category=econ&venue=venue_b&min_venues=2", rtFilter{category: "econ", venue: "venue_b"}},
		} {
			want := w.model.listed(tc.f)
			for _, limit := range []string{"7", "100"} {
				if got := rtWalk(t, w, n, secret, tc.query+"&limit="+limit); !reflect.DeepEqual(got, want) {
					t.Errorf("%q limit %s:\n got %q\nwant %q", tc.query, limit, got, want)
				}
			}
		}
		// min_venues 1, 2 and absent are one filter: their cursors are interchangeable.
		p := rtDecodePage(t, n.get(t, "/public/v1/events?limit=3&min_venues=1", secret))
		a := n.get(t, "/public/v1/events?limit=3&min_venues=2&cursor="+url.QueryEscape(*p.NextCursor), secret)
		if got := rtIDs(t, a, "universal_id"); !reflect.DeepEqual(got, all[3:6]) {
			t.Errorf("cursor of min_venues=1 used with min_venues=2: %q, want %q", got, all[3:6])
		}
		for _, tc := range []struct{ query, param string }{
			{"min_venues=0", "min_venues"}, {"min_venues=5", "min_venues"}, {"min_venues=x", "min_venues"},
			{"venue=venue_e", "venue"}, {"venue=VENUE_A", "venue"}, {"venue=", "venue"}, {"venue", "venue"},
			{"category=Politics", "category"}, {"category=a_b", "category"}, {"category=", "category"},
			{"min_venues=", "min_venues"},
			{"category=" + strings.Repeat("a", 33), "category"},
		} {
			a := n.get(t, "/public/v1/events?"+tc.query, secret)
			wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", tc.param)
		}
	})

	t.Run("bytewise order", func(t *testing.T) {
		got := rtWalk(t, w, n, secret, "limit=100")
		if !slices.IsSorted(got) || !reflect.DeepEqual(got, all) {
			t.Errorf("got %q\nwant %q", got, all)
		}
		// '-' < '0' < 'A' < 'Z' < '_' < 'a' < 'z': not a case-folded or locale order.
		if got[0][0] != '-' || got[len(got)-1][0] != 'z' {
			t.Errorf("first %q, last %q: want '-…' first and 'z…' last", got[0], got[len(got)-1])
		}
	})
}

func TestEventRead(t *testing.T) {
	w, nodes, secret := rtSetup(t, 1)
	n := nodes[0]
	for _, id := range []string{"E-main", "rsv", "Aev02", "-ev00", "aev05"} {
		a := n.get(t, "/public/v1/events/"+id, secret)
		rtWant200(t, a)
		want := w.model.eventRead(id)
		rtWantObject(t, id, a.body, want, rtEventKeys)
		var doc map[string][]json.RawMessage
		json.Unmarshal(a.body, &doc) //nolint:errcheck // the summary fields do not decode; checked above
		for _, list := range []string{"markets", "recently_resolved"} {
			for i, raw := range doc[list] {
				if wl := want[list].([]any); i < len(wl) {
					rtWantObject(t, id+" "+list+" "+strconv.Itoa(i), raw, wl[i].(map[string]any), rtMarketKeys)
				}
			}
		}
	}

	main := w.model.eventRead("E-main")
	ids := func(v any) []string {
		var out []string
		for _, it := range v.([]any) {
			out = append(out, it.(map[string]any)["universal_id"].(string))
		}
		return out
	}
	if got, want := ids(main["markets"]), []string{"M-a", "m-b", "m_c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("model markets %q, want %q", got, want)
	}
	if got, want := ids(main["recently_resolved"]), []string{"r1", "r2", "r3", "r4", "r5", "r6"}; !reflect.DeepEqual(got, want) {
		t.Errorf("model recently_resolved %q, want %q", got, want)
	}
	var rsv struct {
		Status string `json:"status"`
	}
	json.Unmarshal(n.get(t, "/public/v1/events/rsv", secret).body, &rsv) //nolint:errcheck // a body that is not JSON leaves rsv empty, which the checks below refuse
	if rsv.Status != "resolved" {
		t.Errorf("resolved event: status %q, want resolved", rsv.Status)
	}

	rtWantMerged(t, n.get(t, "/public/v1/events/mrg", secret), "E-main")
	for _, id := range []string{"solo", "nope", "e-main", strings.Repeat("a", 65), "a.b", "%C3%A9"} {
		a := n.get(t, "/public/v1/events/"+id, secret)
		wantError(t, a, http.StatusNotFound, "not_found", "")
		wantLimitHeaders(t, a, true)
	}
}

// GET /markets/search: prefix matches, then other matches, each by volume
// desc then ascending id; literal text; served active events only.
func TestSearchRoute(t *testing.T) {
	w, nodes, secret := rtSetup(t, 1)
	n := nodes[0]
	for _, tc := range []struct {
		q     string
		limit string
		want  int
	}{
		{"", "", 20}, {"", "50", 50}, {"", "1", 1}, {"election", "", 20}, {"ELECTION", "50", 29},
		{"elec", "50", 29}, {"who wins", "50", 14}, {"region", "50", 14}, {"0%", "50", 14}, {"100%", "50", 1},
		{"e%n", "50", 0}, {"_", "50", 14}, {"rate_", "50", 14}, {"R_", "50", 0}, {"?", "50", 14},
		{"election resolved", "50", 0}, {"election merged", "50", 0}, {"election with one", "50", 0},
		{"zzz", "50", 0}, {strings.Repeat("é", 100), "", 0},
	} {
		path := "/public/v1/markets/search?q=" + url.QueryEscape(tc.q)
		if tc.limit != "" {
			path += "&limit=" + tc.limit
		}
		a := n.get(t, path, secret)
		limit := 20
		if tc.limit != "" {
			limit, _ = strconv.Atoi(tc.limit)
		}
		want := w.model.search(tc.q, limit)
		if len(want) != tc.want {
			t.Errorf("%q: model ranks %d events, want %d", tc.q, len(want), tc.want)
		}
		var items []map[string]any
		for _, id := range want {
			items = append(items, w.model.summary(id))
		}
		rtWantItems(t, a, items, rtSummaryKeys)
		if keys := rtKeys(t, a.body); !reflect.DeepEqual(keys, []string{"data"}) {
			t.Errorf("%q: keys %q, want [data]", tc.q, keys)
		}
	}
	if got := w.model.search("election", 3); got[0] != "E-main" {
		t.Errorf("model: %q first, want E-main (prefix, highest volume)", got)
	}
	for _, bad := range []string{"q=" + strings.Repeat("x", 101) + "&limit=5", "limit=0", "limit=51", "limit=abc", "limit=", "limit=-1"} {
		a := n.get(t, "/public/v1/markets/search?"+bad, secret)
		param := "limit"
		if strings.HasPrefix(bad, "q=") {
			param = "q"
		}
		wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", param)
	}
}

// search ranks the listed events for q by the contract's rule.
func (m *rtModel) search(q string, limit int) []string {
	return m.searchWith(q, limit, rtFilter{})
}

// searchWith is search over the listed events f keeps (its match filters).
func (m *rtModel) searchWith(q string, limit int, f rtFilter) []string {
	lq := strings.ToLower(q)
	var starts, contains []string
	for _, id := range m.listed(rtFilter{minConf: f.minConf, relation: f.relation}) {
		title := strings.ToLower(*m.events[id].Title)
		switch {
		case strings.HasPrefix(title, lq):
			starts = append(starts, id)
		case strings.Contains(title, lq):
			contains = append(contains, id)
		}
	}
	byVolume := func(a, b string) int {
		if va, vb := *m.events[a].Volume, *m.events[b].Volume; va != vb {
			if va > vb {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	}
	slices.SortFunc(starts, byVolume)
	slices.SortFunc(contains, byVolume)
	out := append(starts, contains...)
	return out[:min(limit, len(out))]
}

// marketItem is a market as an event read lists it.
func (m *rtModel) marketItem(mk *ingest.MarketMsg) map[string]any {
	it := map[string]any{"universal_id": *mk.UniversalID, "event_id": *mk.EventID, "title": *mk.Title,
		"status": *mk.Status, "venues": mk.Venues,
		"matches": rtMatches(mk.Matches, func(i int) bool { _, ok := mk.Venues[rtVenueNames[i]]; return ok })}
	if *mk.Status == "resolved" {
		it["resolved_at"], it["result"] = rtUTC(*mk.ResolvedAt), *mk.Result
	}
	return rtNorm(it)
}

// rtRecent: resolved within the retention (168h), so still served.
func rtRecent(mk *ingest.MarketMsg) bool {
	return *mk.Status == "resolved" && rtTime(*mk.ResolvedAt).After(time.Now().Add(-168*time.Hour))
}

// eventRead is the expected answer of /events/{id} for a served event.
func (m *rtModel) eventRead(id string) map[string]any {
	var active, resolved []*ingest.MarketMsg
	for _, mk := range m.markets {
		switch {
		case *mk.EventID != id:
		case *mk.Status == "active":
			active = append(active, mk)
		case rtRecent(mk):
			resolved = append(resolved, mk)
		}
	}
	slices.SortFunc(active, func(a, b *ingest.MarketMsg) int { return strings.Compare(*a.UniversalID, *b.UniversalID) })
	slices.SortFunc(resolved, func(a, b *ingest.MarketMsg) int {
		if c := rtTime(*b.ResolvedAt).Compare(rtTime(*a.ResolvedAt)); c != 0 {
			return c
		}
		return strings.Compare(*a.UniversalID, *b.UniversalID)
	})
	doc := m.summary(id)
	doc["markets"], doc["recently_resolved"] = []any{}, []any{}
	for _, mk := range active {
		doc["markets"] = append(doc["markets"].([]any), m.marketItem(mk))
	}
	for _, mk := range resolved[:min(6, len(resolved))] {
		doc["recently_resolved"] = append(doc["recently_resolved"].([]any), m.marketItem(mk))
	}
	return doc
}

// rtWantMerged checks a 404 for an event merged into into.
func rtWantMerged(t *testing.T, a answer, into string) {
	t.Helper()
	wantBasics(t, a)
	var body struct {
		Error map[string]string `json:"error"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil || a.status != http.StatusNotFound {
		t.Fatalf("got %d %s, want 404 with an error body", a.status, a.body)
	}
	e := body.Error
	if e["code"] != "not_found" || e["merged_into"] != into || e["message"] == "" || len(e) != 3 {
		t.Errorf("error = %v, want code not_found, a message and merged_into %q", e, into)
	}
	wantLimitHeaders(t, a, true)
}

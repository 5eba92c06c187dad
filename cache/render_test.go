package cache_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// testNow is the fixed clock every test renders with.
var testNow = time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC)

const testRetention = 168 * time.Hour

func testRules() cache.Rules {
	return cache.Rules{Retention: testRetention, Now: func() time.Time { return testNow }}
}

func ptr[T any](v T) *T { return &v }

// venues builds an event's venue ids from "a", "b", "c", "d" keys.
func venues(ids map[string]string) [4]*string {
	var out [4]*string
	for k, v := range ids {
		out[int(k[0]-'a')] = ptr(v)
	}
	return out
}

func sorted(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func activeEvent(id, category string, venueIDs map[string]string) *store.Event {
	return &store.Event{
		ID: id, Version: 1, Title: "Event " + id, Category: category, Status: store.StatusActive,
		VenueIDs: venues(venueIDs), Volume: 10, UpdatedAt: testNow.Add(-time.Hour),
	}
}

func activeMarket(id, event string) store.Market {
	return store.Market{ID: id, EventID: event, Version: 1, Title: "Market " + id, Status: store.StatusActive,
		Venues: map[string]string{"venue_a": id + "-a"}, UpdatedAt: testNow.Add(-time.Hour)}
}

func resolvedMarket(id, event string, ago time.Duration) store.Market {
	m := activeMarket(id, event)
	m.Status = store.StatusResolved
	m.ResolvedAt = ptr(testNow.Add(-ago))
	m.Result = ptr("yes")
	return m
}

func TestRenderEventFullExample(t *testing.T) {
	plus2 := time.FixedZone("plus2", 2*3600)
	e := &store.Event{
		ID: "ev-1", Version: 3, Title: `Who wins "X" & <Y>?`, Category: "politics", Status: store.StatusActive,
		VenueIDs: venues(map[string]string{"a": "KX-1", "c": "c-77"}), Volume: 1234.5,
		UpdatedAt: time.Date(2024, 5, 9, 10, 30, 0, 123456000, plus2),
	}
	mA := store.Market{ID: "m-a", EventID: "ev-1", Title: "A", Status: store.StatusActive,
		Venues: map[string]string{"venue_c": "c-77-a", "venue_a": "KX-1-A"}}
	mB := store.Market{ID: "m-b", EventID: "ev-1", Title: "B", Status: store.StatusResolved,
		Venues: map[string]string{"venue_a": "KX-1-B"}, ResolvedAt: ptr(testNow.Add(-time.Hour).In(plus2)), Result: ptr("yes")}
	mC := store.Market{ID: "m-c", EventID: "ev-1", Title: "C", Status: store.StatusActive}
	mD := resolvedMarket("m-d", "ev-1", testRetention+time.Hour)

	got := testRules().RenderEvent(store.EventDoc{ID: "ev-1", Rev: 42, Event: e, Markets: []store.Market{mA, mB, mC, mD}})

	const summary = `{"universal_id":"ev-1","title":"Who wins \"X\" & <Y>?","category":"politics","status":"active",` +
		`"venue_a_event_ticker":"KX-1","venue_b_event_slug":null,"venue_c_event_id":"c-77","venue_d_event_id":null,` +
		`"venue_count":2,"volume":1234.5,"updated_at":"2024-05-09T08:30:00.123456Z","matches":{"venue_a":null,"venue_c":null}}`
	const body = `{"universal_id":"ev-1","title":"Who wins \"X\" & <Y>?","category":"politics","status":"active",` +
		`"venue_a_event_ticker":"KX-1","venue_b_event_slug":null,"venue_c_event_id":"c-77","venue_d_event_id":null,` +
		`"venue_count":2,"volume":1234.5,"updated_at":"2024-05-09T08:30:00.123456Z","matches":{"venue_a":null,"venue_c":null},` +
		`"markets":[{"universal_id":"m-a","event_id":"ev-1","title":"A","status":"active","venues":{"venue_a":"KX-1-A","venue_c":"c-77-a"},` +
		`"matches":{"venue_a":null,"venue_c":null}},` +
		`{"universal_id":"m-c","event_id":"ev-1","title":"C","status":"active","venues":{},"matches":{}}],` +
		`"recently_resolved":[{"universal_id":"m-b","event_id":"ev-1","title":"B","status":"resolved","venues":{"venue_a":"KX-1-B"},` +
		`"resolved_at":"2024-05-10T11:00:00Z","result":"yes","matches":{"venue_a":null}}]}`
	if string(got.Body) != body {
		t.Errorf("body:\n got %s\nwant %s", got.Body, body)
	}
	if string(got.Summary) != summary {
		t.Errorf("summary:\n got %s\nwant %s", got.Summary, summary)
	}
	if got.ID != "ev-1" || got.Rev != 42 || got.MergedInto != "" {
		t.Errorf("got id %q rev %d merged_into %q, want ev-1 42 \"\"", got.ID, got.Rev, got.MergedInto)
	}
	wantSets := []string{"*:*:1", "*:venue_a:1", "*:venue_c:1", "politics:*:1", "politics:venue_a:1", "politics:venue_c:1"}
	if g := sorted(got.Sets); !slices.Equal(g, wantSets) {
		t.Errorf("sets: got %q, want %q", g, wantSets)
	}
}

func TestRenderEventNotListed(t *testing.T) {
	two := map[string]string{"a": "A1", "b": "B1"}
	merged := activeEvent("ev", "politics", two)
	merged.Status, merged.MergedInto = store.StatusMerged, ptr("ev-into")
	resolved := activeEvent("ev", "politics", two)
	resolved.Status = store.StatusResolved
	tests := []struct {
		name       string
		event      *store.Event
		wantBody   bool
		wantMerged string
	}{
		{"unknown", nil, false, ""},
		{"merged", merged, false, "ev-into"},
		{"one venue", activeEvent("ev", "politics", map[string]string{"d": "D1"}), false, ""},
		{"no venue", activeEvent("ev", "politics", nil), false, ""},
		{"resolved", resolved, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testRules().RenderEvent(store.EventDoc{ID: "ev", Rev: 7, Event: tt.event,
				Markets: []store.Market{activeMarket("m1", "ev")}})
			if got.ID != "ev" || got.Rev != 7 {
				t.Errorf("got id %q rev %d, want ev 7", got.ID, got.Rev)
			}
			if (got.Body != nil) != tt.wantBody {
				t.Errorf("body: got %s, want present=%v", got.Body, tt.wantBody)
			}
			if got.MergedInto != tt.wantMerged {
				t.Errorf("merged_into: got %q, want %q", got.MergedInto, tt.wantMerged)
			}
			if got.Summary != nil || got.Sets != nil {
				t.Errorf("got summary %s sets %q, want none", got.Summary, got.Sets)
			}
		})
	}
	t.Run("resolved body", func(t *testing.T) {
		got := testRules().RenderEvent(store.EventDoc{ID: "ev", Rev: 7, Event: resolved})
		want := `{"universal_id":"ev","title":"Event ev","category":"politics","status":"resolved",` +
			`"venue_a_event_ticker":"A1","venue_b_event_slug":"B1","venue_c_event_id":null,"venue_d_event_id":null,` +
			`"venue_count":2,"volume":10,"updated_at":"2024-05-10T11:00:00Z","matches":{"venue_a":null,"venue_b":null},` +
			`"markets":[],"recently_resolved":[]}`
		if string(got.Body) != want {
			t.Errorf("got %s\nwant %s", got.Body, want)
		}
	})
}

// eventIDs is the part of an event read that names its markets.
type eventIDs struct {
	Markets []struct {
		UniversalID string `json:"universal_id"`
	} `json:"markets"`
	RecentlyResolved []struct {
		UniversalID string `json:"universal_id"`
	} `json:"recently_resolved"`
}

func TestRenderEventRecentlyResolved(t *testing.T) {
	ms := []store.Market{
		resolvedMarket("r1", "ev", 5*time.Hour),
		resolvedMarket("r2", "ev", 1*time.Hour),
		resolvedMarket("r3", "ev", 3*time.Hour), // ties with r4 and r5
		resolvedMarket("r4", "ev", 3*time.Hour),
		resolvedMarket("r5", "ev", 3*time.Hour),
		resolvedMarket("r6", "ev", testRetention+time.Second), // too old
		resolvedMarket("r7", "ev", 2*time.Hour),
		resolvedMarket("r8", "ev", 6*time.Hour), // seventh newest: cut
		resolvedMarket("r9", "ev", testRetention-time.Second),
		activeMarket("x1", "ev"),
	}
	got := testRules().RenderEvent(store.EventDoc{ID: "ev", Rev: 1,
		Event: activeEvent("ev", "sports", map[string]string{"a": "A", "b": "B"}), Markets: ms})
	doc := decode[eventIDs](t, got.Body)
	var ids []string
	for _, m := range doc.RecentlyResolved {
		ids = append(ids, m.UniversalID)
	}
	if want := []string{"r2", "r7", "r3", "r4", "r5", "r1"}; !slices.Equal(ids, want) {
		t.Errorf("recently_resolved: got %q, want %q", ids, want)
	}
	if len(doc.Markets) != 1 || doc.Markets[0].UniversalID != "x1" {
		t.Errorf("markets: got %+v, want [x1]", doc.Markets)
	}

	// With fewer than six, the old one stays out and the one inside retention is in.
	got = testRules().RenderEvent(store.EventDoc{ID: "ev", Rev: 1,
		Event: activeEvent("ev", "sports", map[string]string{"a": "A", "b": "B"}), Markets: []store.Market{ms[5], ms[8]}})
	doc = decode[eventIDs](t, got.Body)
	if len(doc.RecentlyResolved) != 1 || doc.RecentlyResolved[0].UniversalID != "r9" || len(doc.Markets) != 0 {
		t.Errorf("got %s, want only r9 recently resolved and no markets", got.Body)
	}
}

// matches says whether an event with these venues and category satisfies the
// /events filters, as the contract defines them ("" = no filter).
func matches(category string, venueIdx []int, fCategory, fVenue string, fMin int) bool {
	if fCategory != "" && fCategory != category {
		return false
	}
	if fVenue != "" && !slices.Contains(venueIdx, store.VenueIndex(fVenue)) {
		return false
	}
	return len(venueIdx) >= fMin
}

func TestRenderEventSets(t *testing.T) {
	tests := []struct {
		name     string
		category string
		venues   map[string]string
		literal  []string // checked exactly when set
	}{
		{"two venues", "sports", map[string]string{"b": "B", "d": "D"}, []string{
			"*:*:1", "*:venue_b:1", "*:venue_d:1", "sports:*:1", "sports:venue_b:1", "sports:venue_d:1"}},
		{"three venues", "politics", map[string]string{"a": "A", "b": "B", "c": "C"}, []string{
			"*:*:1", "*:*:3", "*:venue_a:1", "*:venue_a:3", "*:venue_b:1", "*:venue_b:3", "*:venue_c:1", "*:venue_c:3",
			"politics:*:1", "politics:*:3", "politics:venue_a:1", "politics:venue_a:3",
			"politics:venue_b:1", "politics:venue_b:3", "politics:venue_c:1", "politics:venue_c:3"}},
		{"four venues", "crypto-2", map[string]string{"a": "A", "b": "B", "c": "C", "d": "D"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := activeEvent("ev", tt.category, tt.venues)
			got := sorted(testRules().RenderEvent(store.EventDoc{ID: "ev", Rev: 1, Event: e}).Sets)
			if tt.literal != nil && !slices.Equal(got, sorted(tt.literal)) {
				t.Errorf("got %q, want %q", got, sorted(tt.literal))
			}
			var idx []int
			for i, v := range e.VenueIDs {
				if v != nil {
					idx = append(idx, i)
				}
			}
			// Every filter combination the event satisfies names a set it is
			// in, and it is in no other set.
			var want []string
			for _, c := range []string{"", tt.category, "other"} {
				for _, v := range []string{"", "venue_a", "venue_b", "venue_c", "venue_d"} {
					for n := 1; n <= 4; n++ {
						if matches(tt.category, idx, c, v, n) {
							want = append(want, cache.SetName(c, v, strconv.Itoa(n)))
						}
					}
				}
			}
			if want = slices.Compact(sorted(want)); !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestSetName(t *testing.T) {
	tests := []struct{ category, venue, min, want string }{
		{"", "", "", "*:*:1"},
		{"", "", "1", "*:*:1"},
		{"", "", "2", "*:*:1"},
		{"", "", "3", "*:*:3"},
		{"politics", "", "4", "politics:*:4"},
		{"", "venue_c", "2", "*:venue_c:1"},
		{"sports", "venue_a", "", "sports:venue_a:1"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q,%q,%q", tt.category, tt.venue, tt.min), func(t *testing.T) {
			if got := cache.SetName(tt.category, tt.venue, tt.min); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func quote(bid, ask, last *float64, vol float64) store.Quote {
	return store.Quote{Bid: bid, Ask: ask, Last: last, Volume24h: vol}
}

func TestRenderMarketExample(t *testing.T) {
	d := store.MarketDoc{
		ID: "m-1", Rev: 9, Market: ptr(activeMarket("m-1", "ev-1")),
		Event: activeEvent("ev-1", "politics", map[string]string{"a": "A", "b": "B"}),
		Price: &store.Price{MarketID: "m-1", Version: 7, TS: time.Date(2024, 5, 10, 13, 59, 59, 500000000, time.FixedZone("x", 7200)),
			Quotes: map[string]store.Quote{
				"venue_c": quote(nil, ptr(0.44), ptr(0.43), 12.5),
				"venue_a": quote(ptr(0.4), ptr(0.45), nil, 1000),
				"venue_b": quote(ptr(0.42), nil, ptr(0.41), 0),
			}},
	}
	got := testRules().RenderMarket(d)
	want := `{"market_id":"m-1","event_id":"ev-1","status":"active","quotes":{` +
		`"venue_a":{"bid":0.4,"ask":0.45,"last":null,"volume_24h":1000},` +
		`"venue_b":{"bid":0.42,"ask":null,"last":0.41,"volume_24h":0},` +
		`"venue_c":{"bid":null,"ask":0.44,"last":0.43,"volume_24h":12.5}},` +
		`"best_bid":0.42,"best_ask":0.44,"version":7,"updated_at":"2024-05-10T11:59:59.5Z"}`
	if string(got.Body) != want || !got.Served || got.ID != "m-1" || got.Rev != 9 {
		t.Errorf("got %+v body %s\nwant served m-1 rev 9 body %s", got, got.Body, want)
	}

	d.Price.Quotes = map[string]store.Quote{"venue_a": quote(nil, nil, ptr(0.5), 3)}
	want = `{"market_id":"m-1","event_id":"ev-1","status":"active","quotes":{` +
		`"venue_a":{"bid":null,"ask":null,"last":0.5,"volume_24h":3}},` +
		`"best_bid":null,"best_ask":null,"version":7,"updated_at":"2024-05-10T11:59:59.5Z"}`
	if got := testRules().RenderMarket(d); string(got.Body) != want {
		t.Errorf("no bid or ask: got %s\nwant %s", got.Body, want)
	}
	d.Price.Quotes = nil
	if got := testRules().RenderMarket(d); !strings.Contains(string(got.Body), `"quotes":{},"best_bid":null,"best_ask":null`) {
		t.Errorf("no quotes: got %s", got.Body)
	}
}

func TestRenderMarketServed(t *testing.T) {
	two := map[string]string{"a": "A", "b": "B"}
	merged := activeEvent("ev", "x", two)
	merged.Status, merged.MergedInto = store.StatusMerged, ptr("other")
	resolvedEv := activeEvent("ev", "x", two)
	resolvedEv.Status = store.StatusResolved
	price := &store.Price{MarketID: "m", Version: 1, TS: testNow, Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.1), ptr(0.2), nil, 1)}}
	tests := []struct {
		name   string
		market *store.Market
		event  *store.Event
		price  *store.Price
		served bool
	}{
		{"active", ptr(activeMarket("m", "ev")), activeEvent("ev", "x", two), price, true},
		{"recently resolved", ptr(resolvedMarket("m", "ev", time.Hour)), activeEvent("ev", "x", two), price, true},
		{"resolved long ago", ptr(resolvedMarket("m", "ev", testRetention+time.Hour)), activeEvent("ev", "x", two), price, false},
		{"event resolved", ptr(activeMarket("m", "ev")), resolvedEv, price, true},
		{"unknown market", nil, activeEvent("ev", "x", two), price, false},
		{"unknown event", ptr(activeMarket("m", "ev")), nil, price, false},
		{"event merged", ptr(activeMarket("m", "ev")), merged, price, false},
		{"event one venue", ptr(activeMarket("m", "ev")), activeEvent("ev", "x", map[string]string{"a": "A"}), price, false},
		{"served without price", ptr(activeMarket("m", "ev")), activeEvent("ev", "x", two), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := store.MarketDoc{ID: "m", Rev: 3, Market: tt.market, Event: tt.event, Price: tt.price}
			got := testRules().RenderMarket(d)
			if got.Served != tt.served || testRules().MarketServed(d) != tt.served {
				t.Errorf("served: got %v, want %v", got.Served, tt.served)
			}
			if wantBody := tt.served && tt.price != nil; (got.Body != nil) != wantBody {
				t.Errorf("body: got %s, want present=%v", got.Body, wantBody)
			}
		})
	}
}

func TestRenderTrade(t *testing.T) {
	tr := &store.Trade{MarketID: "m-1", TradeID: "t-1", Venue: "venue_b", Price: 0.42, Size: 10, Side: "buy",
		TS: time.Date(2024, 5, 10, 6, 59, 58, 1000, time.FixedZone("y", -5*3600))}
	want := `{"trade_id":"t-1","market_id":"m-1","venue":"venue_b","price":0.42,"size":10,"side":"buy","ts":"2024-05-10T11:59:58.000001Z"}`
	if got := string(cache.RenderTrade(tr)); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if got, want := cache.TradeScore(tr), float64(tr.TS.UnixMicro()); got != want {
		t.Errorf("score: got %v, want %v", got, want)
	}
	if got, want := cache.TradeScore(tr), float64(1715342398000001); got != want {
		t.Errorf("score: got %.0f, want %.0f", got, want)
	}
}

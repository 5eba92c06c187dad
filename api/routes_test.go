package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
)

// rtModel is what the test published, latest version of each entity; the
// routes' expected answers are computed from it by the contract's rules.
type rtModel struct {
	events  map[string]*ingest.EventMsg
	markets map[string]*ingest.MarketMsg
	prices  map[string]*ingest.PriceMsg
	trades  map[string][]ingest.TradeMsg
}

func rtNewModel() *rtModel {
	return &rtModel{events: map[string]*ingest.EventMsg{}, markets: map[string]*ingest.MarketMsg{},
		prices: map[string]*ingest.PriceMsg{}, trades: map[string][]ingest.TradeMsg{}}
}

func (m *rtModel) record(kind, id string, data []byte) {
	var err error
	switch kind {
	case "event":
		var v ingest.EventMsg
		if err = json.Unmarshal(data, &v); err == nil && (m.events[id] == nil || *v.Version > *m.events[id].Version) {
			m.events[id] = &v
		}
	case "market":
		var v ingest.MarketMsg
		if err = json.Unmarshal(data, &v); err == nil && (m.markets[id] == nil || *v.Version > *m.markets[id].Version) {
			m.markets[id] = &v
		}
	case "price":
		var v ingest.PriceMsg
		if err = json.Unmarshal(data, &v); err == nil && (m.prices[id] == nil || *v.Version > *m.prices[id].Version) {
			m.prices[id] = &v
		}
	case "trade":
		var v ingest.TradeMsg
		if err = json.Unmarshal(data, &v); err == nil {
			m.trades[id] = append(m.trades[id], v)
		}
	}
	if err != nil {
		panic(err)
	}
}

// Key orders of the contract's objects (§3).
var (
	rtSummaryKeys = []string{"universal_id", "title", "category", "status", "venue_a_event_ticker",
		"venue_b_event_slug", "venue_c_event_id", "venue_d_event_id", "venue_count", "volume", "updated_at", "matches"}
	rtEventKeys  = append(slices.Clone(rtSummaryKeys), "markets", "recently_resolved")
	rtMarketKeys = []string{"universal_id", "event_id", "title", "status", "venues", "resolved_at", "result", "matches"}
	rtPriceKeys  = []string{"market_id", "event_id", "status", "quotes", "best_bid", "best_ask", "version", "updated_at"}
	rtTradeKeys  = []string{"trade_id", "market_id", "venue", "price", "size", "side", "ts", "inverted"}
)

// rtNorm turns a value into what decoding its JSON gives.
func rtNorm(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// rtUTC is the wire form of a published time: RFC 3339 in UTC, microseconds.
func rtUTC(s string) string { return rtTime(s).Format(time.RFC3339Nano) }

func rtTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC().Truncate(time.Microsecond)
}

func rtVenues(e *ingest.EventMsg) []*string {
	return []*string{e.VenueAEventTicker, e.VenueBEventSlug, e.VenueCEventID, e.VenueDEventID}
}

func rtVenueCount(e *ingest.EventMsg) int {
	n := 0
	for _, v := range rtVenues(e) {
		if v != nil {
			n++
		}
	}
	return n
}

func (m *rtModel) served(id string) bool {
	e := m.events[id]
	return e != nil && *e.Status != "merged" && rtVenueCount(e) >= 2
}

func (m *rtModel) summary(id string) map[string]any {
	e := m.events[id]
	return rtNorm(map[string]any{"universal_id": id, "title": *e.Title, "category": *e.Category,
		"status": *e.Status, "venue_a_event_ticker": e.VenueAEventTicker, "venue_b_event_slug": e.VenueBEventSlug,
		"venue_c_event_id": e.VenueCEventID, "venue_d_event_id": e.VenueDEventID,
		"venue_count": rtVenueCount(e), "volume": *e.Volume, "updated_at": rtUTC(*e.UpdatedAt),
		"matches": rtMatches(e.Matches, func(i int) bool { return rtVenues(e)[i] != nil })})
}

// rtFilter is an /events filter; zero fields do not filter.
type rtFilter struct {
	category, venue string
	min             int
	// minConf and relation are the match filters (min_confidence,
	// relation).
	minConf  float64
	relation string
}

// listed is the ids /events walks for f, ascending bytewise.
func (m *rtModel) listed(f rtFilter) []string {
	ids := []string{}
	for id, e := range m.events {
		vi := slices.Index([]string{"venue_a", "venue_b", "venue_c", "venue_d"}, f.venue)
		if !m.served(id) || *e.Status != "active" || (f.category != "" && *e.Category != f.category) ||
			(vi >= 0 && rtVenues(e)[vi] == nil) || rtVenueCount(e) < f.min || !rtKeeps(e, f) {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// rtKeeps is the contract's match filter: with a least confidence above 0
// or a relation, every venue link (venue id) must have metadata at least
// that sure and of that relation.
func rtKeeps(e *ingest.EventMsg, f rtFilter) bool {
	if f.minConf == 0 && f.relation == "" {
		return true
	}
	for i, v := range rtVenues(e) {
		if v == nil {
			continue
		}
		mm := e.Matches[rtVenueNames[i]]
		if mm == nil || *mm.Confidence < f.minConf || (f.relation != "" && *mm.Relation != f.relation) {
			return false
		}
	}
	return true
}

// rtFixture publishes the standard data set: 56 listed events with mixed-case
// ids, categories, venue sets and tied volumes; a main event with active,
// recently resolved and old resolved markets; a 1-venue, a merged and a
// resolved event; prices and trades (with equal timestamps) on them.
func rtFixture(t *testing.T, w *world) {
	t.Helper()
	venue := func(mask, i int, id string) any {
		if mask&(1<<i) == 0 {
			return nil
		}
		return fmt.Sprintf("V%c-%s", 'a'+i, id)
	}
	event := func(id string, v int, title, cat, status string, mask int, vol float64, updated string) {
		b := map[string]any{"universal_id": id, "version": v, "title": title, "category": cat, "status": status,
			"merged_into": nil, "venue_a_event_ticker": venue(mask, 0, id), "venue_b_event_slug": venue(mask, 1, id),
			"venue_c_event_id": venue(mask, 2, id), "venue_d_event_id": venue(mask, 3, id), "volume": vol, "updated_at": updated}
		if status == "merged" {
			b["merged_into"] = "E-main"
		}
		w.publish(t, "event", id, b)
	}
	titles := []string{"Election in region %d", "Who wins the election? #%d", "BTC above %d0%% by June", "Rate_cut %d"}
	masks := []int{0b0011, 0b1100, 0b0111, 0b1110, 0b1111}
	for i := range 56 {
		id := fmt.Sprintf("%cev%02d", "-0AZ_az"[i%7], i)
		updated := fmt.Sprintf("2024-05-10T12:%02d:00.123456Z", i)
		if i == 3 {
			updated = "2024-05-10T14:03:00.5+02:00"
		}
		event(id, 1, fmt.Sprintf(titles[i%4], i), []string{"politics", "crypto", "sports-2"}[i%3],
			"active", masks[i%5], float64((i*7)%10)*1000+0.5, updated)
	}
	event("E-main", 1, "ELECTION night: main event", "econ", "active", 0b0111, 5e6, "2024-05-10T09:00:00Z")
	event("solo", 1, "Election with one venue", "politics", "active", 0b0001, 9e6, "2024-05-10T09:00:00Z")
	event("mrg", 1, "Election merged away", "politics", "merged", 0b0011, 9e6, "2024-05-10T09:00:00Z")
	event("rsv", 1, "Election resolved", "politics", "active", 0b0101, 9e6, "2024-05-10T09:00:00Z")
	event("rsv", 2, "Election resolved", "politics", "resolved", 0b0101, 9e6, "2024-05-10T10:00:00Z")

	market := func(id, ev, status string, resolvedAgo time.Duration) {
		b := map[string]any{"universal_id": id, "event_id": ev, "version": 1, "title": "Market " + id,
			"status": status, "venues": map[string]string{"venue_a": "a-" + id, "venue_c": "c-" + id},
			"resolved_at": nil, "result": nil, "updated_at": "2024-05-10T09:00:00Z"}
		if status == "resolved" {
			b["resolved_at"] = time.Now().Add(-resolvedAgo).UTC().Format(time.RFC3339Nano)
			b["result"] = "yes"
		}
		w.publish(t, "market", id, b)
	}
	for _, id := range []string{"m_c", "m-b", "M-a"} {
		market(id, "E-main", "active", 0)
	}
	for k := 8; k >= 1; k-- {
		market(fmt.Sprintf("r%d", k), "E-main", "resolved", time.Duration(k)*time.Hour)
	}
	market("r-old", "E-main", "resolved", 200*time.Hour)
	market("mm-1", "mrg", "active", 0)
	market("sm-1", "solo", "active", 0)
	market("rv-1", "rsv", "active", 0)

	f := func(v float64) *float64 { return &v }
	price := func(id string, v int, quotes map[string]ingest.QuoteMsg) {
		w.publish(t, "price", id, map[string]any{"market_id": id, "version": v, "ts": "2024-05-10T12:00:00.25Z", "quotes": quotes})
	}
	price("M-a", 1, map[string]ingest.QuoteMsg{"venue_a": {Bid: f(0.1), Ask: f(0.2), Volume24h: f(1)}})
	price("M-a", 2, map[string]ingest.QuoteMsg{
		"venue_a": {Bid: f(0.40), Ask: f(0.45), Last: f(0.42), Volume24h: f(10)},
		"venue_b": {Bid: f(0.41), Ask: f(0.47), Volume24h: f(0)},
		"venue_c": {Ask: f(0.44), Last: f(0.43), Volume24h: f(5.5)},
	})
	for _, id := range []string{"m-b", "r1", "r-old", "mm-1", "sm-1", "rv-1"} {
		price(id, 1, map[string]ingest.QuoteMsg{"venue_d": {Bid: f(0.1), Ask: f(0.9), Last: f(0.5), Volume24h: f(1)}})
	}

	trade := func(market, id string, i int, ts string) {
		w.publish(t, "trade", market, map[string]any{"market_id": market, "trade_id": id,
			"venue": []string{"venue_a", "venue_b", "venue_c"}[i%3], "price": float64(i%100) / 100,
			"size": float64(i) + 0.5, "side": []string{"buy", "sell"}[i%2], "ts": ts})
	}
	// Three trades per timestamp, ids chosen so that trade_id desc is not the
	// publication order; published shuffled.
	order := rand.New(rand.NewPCG(1, 2)).Perm(205)
	for _, i := range order {
		trade("M-a", fmt.Sprintf("%s%03d", []string{"t_", "T", "t"}[i%3], i), i,
			time.Date(2024, 5, 10, 12, 0, i/3, 250_000_000, time.UTC).Format(time.RFC3339Nano))
	}
	for i, id := range []string{"r1", "r1", "r1", "r-old", "mm-1"} {
		trade(id, fmt.Sprintf("x%d", i), i, "2024-05-10T11:00:00Z")
	}
}

// rtSetup is a world with the fixture settled on n nodes, and a key.
func rtSetup(t *testing.T, n int, opts ...option) (*world, []*node, string) {
	t.Helper()
	w := newWorld(t, withIngest())
	var nodes []*node
	for range n {
		nodes = append(nodes, w.node(t, opts...))
	}
	secret := rtSecret(t, w)
	rtFixture(t, w)
	w.settle(t, secret, nodes...)
	return w, nodes, secret
}

// rtOKPaths are 200 answers of every data route.
var rtOKPaths = []string{
	"/public/v1/events", "/public/v1/events?limit=5&category=politics&venue=venue_a&min_venues=2",
	"/public/v1/events/E-main", "/public/v1/events/rsv",
	"/public/v1/prices/snapshot?ids=M-a,nope,r1", "/public/v1/markets/M-a/trades?limit=7",
	"/public/v1/markets/m-b/trades", "/public/v1/markets/search?q=election", "/public/v1/markets/search",
}

// Every 200 has an ETag, the same on a second node; If-None-Match with it
// answers 304 with no body and the RateLimit headers; unknown parameters are
// ignored.
func TestRouteConditionalAcrossNodes(t *testing.T) {
	_, nodes, secret := rtSetup(t, 2)
	for _, path := range rtOKPaths {
		t.Run(path, func(t *testing.T) {
			a := nodes[0].get(t, path, secret)
			rtWant200(t, a)
			tag := a.header.Get("ETag")
			b := nodes[1].get(t, path, secret)
			rtWant200(t, b)
			if got := b.header.Get("ETag"); got != tag || string(b.body) != string(a.body) {
				t.Errorf("second node: ETag %s body %.200s; want %s %.200s", got, b.body, tag, a.body)
			}
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			u := nodes[1].get(t, path+sep+"zzz=1&Limit=abc&ids2=,,", secret)
			if u.status != http.StatusOK || string(u.body) != string(a.body) || u.header.Get("ETag") != tag {
				t.Errorf("with unknown parameters: %d %.200s, want the same 200", u.status, u.body)
			}
			for i, n := range nodes {
				nm := n.get(t, path, secret, "If-None-Match", tag)
				wantBasics(t, nm)
				if nm.status != http.StatusNotModified || len(nm.body) != 0 {
					t.Errorf("node %d If-None-Match: %d %q, want 304 without body", i, nm.status, nm.body)
				}
				wantLimitHeaders(t, nm, true)
			}
			if other := nodes[0].get(t, path, secret, "If-None-Match", `"other"`); other.status != http.StatusOK {
				t.Errorf("If-None-Match with another tag: status %d, want 200", other.status)
			}
		})
	}
}

// rtBadPaths are a bad-parameter request of every data route.
var rtBadPaths = []string{
	"/public/v1/events?limit=0", "/public/v1/events/a.b", "/public/v1/prices/snapshot?ids=a,,b",
	"/public/v1/markets/M-a/trades?limit=201", "/public/v1/markets/search?limit=51",
}

// Scope comes before everything the route reads; the window comes before
// parameters (a request both over the window and malformed is 429); answers
// that passed the window carry the RateLimit headers, 404 and 422 included.
func TestRouteChecksOrder(t *testing.T) {
	w := newWorld(t, withIngest())
	n := w.node(t)
	tight := w.node(t, withLimit(1))
	secret := rtSecret(t, w)
	noScope, _ := w.newKey(t, keyOpts{scopes: []string{"account:read"}})
	for _, path := range append(slices.Clone(rtOKPaths), rtBadPaths...) {
		a := n.get(t, path, noScope)
		wantError(t, a, http.StatusForbidden, "insufficient_scope", "markets:read")
		wantLimitHeaders(t, a, false)
	}
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/public/v1/events/nope", 404, "not_found"},
		{"/public/v1/markets/nope/trades", 404, "not_found"},
		{"/public/v1/events?limit=0", 422, "invalid_request"},
		{"/public/v1/prices/snapshot?ids=", 422, "invalid_request"},
		{"/public/v1/markets/search?q=" + strings.Repeat("x", 101), 422, "invalid_request"},
	} {
		a := n.get(t, tc.path, secret)
		wantError(t, a, tc.status, tc.code, "")
		wantLimitHeaders(t, a, true)
	}

	// The tight node's window is the harness's minute, aligned on the Redis
	// clock: the first request and the refused ones must fall in one.
	waitRoomInWindow(t, w, time.Minute, 10*time.Second)
	exhausted := rtSecret(t, w)
	if a := tight.get(t, "/public/v1/events", exhausted); a.status != http.StatusOK {
		t.Fatalf("first request: %d %s", a.status, a.body)
	}
	for _, path := range rtBadPaths {
		a := tight.get(t, path, exhausted)
		wantError(t, a, http.StatusTooManyRequests, "rate_limited", "limit")
		wantLimitHeaders(t, a, true)
		if got := a.header.Get("RateLimit-Remaining"); got != "0" {
			t.Errorf("%s: RateLimit-Remaining = %q, want 0", path, got)
		}
	}
}

// waitRoomInWindow waits, on the Redis clock, until the aligned window of
// length win has at least need left: a test that fills a window must not
// straddle its end (the next window would admit what it expects refused).
func waitRoomInWindow(t *testing.T, w *world, win, need time.Duration) {
	t.Helper()
	now, err := w.rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms, wms := now.UnixMilli(), win.Milliseconds()
	if left := time.Duration(wms-ms%wms) * time.Millisecond; left < need {
		time.Sleep(left + 5*time.Millisecond) // the window boundary itself is what the test waits for
	}
}

var rtVenueNames = []string{"venue_a", "venue_b", "venue_c", "venue_d"}

// rtMatches is a document's expected matches (contract §3): for each venue
// it has an id on, the published entry or null.
func rtMatches(ms ingest.MatchesMsg, has func(i int) bool) map[string]any {
	out := map[string]any{}
	for i, v := range rtVenueNames {
		if !has(i) {
			continue
		}
		if e := ms[v]; e != nil {
			out[v] = map[string]any{"relation": *e.Relation, "confidence": *e.Confidence, "method": *e.Method}
		} else {
			out[v] = nil
		}
	}
	return out
}

// relation is the published relation of a market with a venue; "" for none.
func (m *rtModel) relation(marketID, venue string) string {
	if mk := m.markets[marketID]; mk != nil && mk.Matches[venue] != nil {
		return *mk.Matches[venue].Relation
	}
	return ""
}

// rtInvert is 1 − p to nine decimals, as a decimal (nil stays nil).
func rtInvert(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v, err := strconv.ParseFloat(strconv.FormatFloat(1-*p, 'f', 9, 64), 64)
	if err != nil {
		panic(err)
	}
	return &v
}

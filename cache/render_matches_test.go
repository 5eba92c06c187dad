package cache_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

func m(relation string, confidence float64, method string) *store.Match {
	return &store.Match{Relation: relation, Confidence: confidence, Method: method}
}

// TestRenderEventMatches: the event summary, the event read and each of its
// markets carry matches, one key per venue id present: the metadata, or null
// for a venue the matcher sent none for.
func TestRenderEventMatches(t *testing.T) {
	e := activeEvent("ev-1", "politics", map[string]string{"a": "A", "b": "B", "d": "D"})
	e.Matches = store.Matches{m("identity", 0.97, "rules"), m("complement", 0.62, "model"), nil, nil}
	mk := activeMarket("m-1", "ev-1")
	mk.Venues = map[string]string{"venue_a": "A-1", "venue_b": "B-1", "venue_c": "C-1"}
	mk.Matches = store.Matches{nil, m("complement", 0.9, "manual"), m("subset", 0.3, "model"), nil}

	got := testRules().RenderEvent(store.EventDoc{ID: "ev-1", Rev: 1, Event: e, Markets: []store.Market{mk}})
	const summary = `{"universal_id":"ev-1","title":"Event ev-1","category":"politics","status":"active",` +
		`"venue_a_event_ticker":"A","venue_b_event_slug":"B","venue_c_event_id":null,"venue_d_event_id":"D",` +
		`"venue_count":3,"volume":10,"updated_at":"2024-05-10T11:00:00Z",` +
		`"matches":{"venue_a":{"relation":"identity","confidence":0.97,"method":"rules"},` +
		`"venue_b":{"relation":"complement","confidence":0.62,"method":"model"},"venue_d":null}}`
	if string(got.Summary) != summary {
		t.Errorf("summary:\n got %s\nwant %s", got.Summary, summary)
	}
	const market = `{"universal_id":"m-1","event_id":"ev-1","title":"Market m-1","status":"active",` +
		`"venues":{"venue_a":"A-1","venue_b":"B-1","venue_c":"C-1"},` +
		`"matches":{"venue_a":null,"venue_b":{"relation":"complement","confidence":0.9,"method":"manual"},` +
		`"venue_c":{"relation":"subset","confidence":0.3,"method":"model"}}}`
	if want := strings.TrimSuffix(summary, "}") + `,"markets":[` + market + `],"recently_resolved":[]}`; string(got.Body) != want {
		t.Errorf("body:\n got %s\nwant %s", got.Body, want)
	}
}

// priceDoc is a served market whose venues have the given metadata, with
// the given quotes.
func priceDoc(ms store.Matches, quotes map[string]store.Quote) store.MarketDoc {
	mk := activeMarket("m-1", "ev-1")
	mk.Venues = map[string]string{"venue_a": "A", "venue_b": "B", "venue_c": "C", "venue_d": "D"}
	mk.Matches = ms
	return store.MarketDoc{ID: "m-1", Rev: 3, Market: &mk,
		Event: activeEvent("ev-1", "politics", map[string]string{"a": "A", "b": "B"}),
		Price: &store.Price{MarketID: "m-1", Version: 5, TS: testNow, Quotes: quotes}}
}

// TestRenderPriceMatches: a complement venue's quote is shown in the
// market's terms and marked inverted, and the best prices are taken over
// identity, complement (inverted) and no-metadata venues only. The ladders
// cross: the complement's inverted bid beats every other bid, and a subset
// venue's raw quote, better than all on both sides, makes neither best price.
func TestRenderPriceMatches(t *testing.T) {
	quotes := map[string]store.Quote{
		"venue_a": quote(ptr(0.40), ptr(0.45), ptr(0.42), 100), // identity
		"venue_b": quote(ptr(0.52), ptr(0.55), ptr(0.7), 40),   // complement: 0.45 / 0.48, last 0.3
		"venue_c": quote(ptr(0.50), ptr(0.41), ptr(0.46), 7),   // subset, crossed and best raw
		"venue_d": quote(ptr(0.39), ptr(0.44), nil, 3),         // no metadata
	}
	ms := store.Matches{m("identity", 1, "rules"), m("complement", 0.8, "model"), m("subset", 0.9, "model"), nil}
	got := testRules().RenderMarket(priceDoc(ms, quotes))
	const want = `{"market_id":"m-1","event_id":"ev-1","status":"active","quotes":{` +
		`"venue_a":{"bid":0.4,"ask":0.45,"last":0.42,"volume_24h":100},` +
		`"venue_b":{"bid":0.45,"ask":0.48,"last":0.3,"volume_24h":40,"inverted":true},` +
		`"venue_c":{"bid":0.5,"ask":0.41,"last":0.46,"volume_24h":7},` +
		`"venue_d":{"bid":0.39,"ask":0.44,"last":null,"volume_24h":3}},` +
		`"best_bid":0.45,"best_ask":0.44,"version":5,"updated_at":"2024-05-10T12:00:00Z"}`
	if string(got.Body) != want {
		t.Errorf("body:\n got %s\nwant %s", got.Body, want)
	}
	if got.Inverted != "venue_b" {
		t.Errorf("inverted venues: got %q, want venue_b", got.Inverted)
	}

	for _, c := range []struct {
		name   string
		ms     store.Matches
		quotes map[string]store.Quote
		want   string // a part of the body
	}{
		// superset and overlap count no more than subset.
		{"superset and overlap left out", store.Matches{m("superset", 1, "x"), m("overlap", 1, "x"), nil, m("identity", 0.1, "x")},
			map[string]store.Quote{"venue_a": quote(ptr(0.9), ptr(0.1), nil, 1), "venue_b": quote(ptr(0.8), ptr(0.2), nil, 1),
				"venue_d": quote(ptr(0.3), ptr(0.6), nil, 1)}, `"best_bid":0.3,"best_ask":0.6`},
		{"only related venues quote", store.Matches{m("subset", 1, "x"), m("overlap", 1, "x"), nil, nil},
			map[string]store.Quote{"venue_a": quote(ptr(0.3), ptr(0.4), nil, 1), "venue_b": quote(ptr(0.3), ptr(0.4), nil, 1)},
			`"best_bid":null,"best_ask":null`},
		// A side the complement venue leaves empty leaves the other side
		// empty in the market's terms.
		{"complement without a bid", store.Matches{m("complement", 1, "x"), nil, nil, nil},
			map[string]store.Quote{"venue_a": quote(nil, ptr(0.7), nil, 1)}, `"venue_a":{"bid":0.3,"ask":null,"last":null,"volume_24h":1,"inverted":true}},"best_bid":0.3,"best_ask":null`},
		{"complement at the bounds", store.Matches{nil, m("complement", 1, "x"), nil, nil},
			map[string]store.Quote{"venue_b": quote(ptr(0.0), ptr(1.0), ptr(1.0), 1)}, `"venue_b":{"bid":0,"ask":1,"last":0,"volume_24h":1,"inverted":true}},"best_bid":0,"best_ask":1`},
		// Metadata on a venue that does not quote changes nothing.
		{"complement venue absent from the quotes", store.Matches{nil, nil, nil, m("complement", 1, "x")},
			map[string]store.Quote{"venue_a": quote(ptr(0.3), ptr(0.7), nil, 1)}, `"quotes":{"venue_a":{"bid":0.3,"ask":0.7,"last":null,"volume_24h":1}},"best_bid":0.3,"best_ask":0.7`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := string(testRules().RenderMarket(priceDoc(c.ms, c.quotes)).Body)
			if !strings.Contains(body, c.want) {
				t.Errorf("got %s\nwant it to hold %s", body, c.want)
			}
		})
	}

	// No metadata, or identity everywhere: the price renders byte for byte
	// as without match metadata.
	plain := string(testRules().RenderMarket(priceDoc(store.Matches{}, quotes)).Body)
	ident := string(testRules().RenderMarket(priceDoc(store.Matches{m("identity", 1, "x"), m("identity", 0, "x"), m("identity", 1, "x"), m("identity", 1, "x")}, quotes)).Body)
	const wantPlain = `{"market_id":"m-1","event_id":"ev-1","status":"active","quotes":{` +
		`"venue_a":{"bid":0.4,"ask":0.45,"last":0.42,"volume_24h":100},` +
		`"venue_b":{"bid":0.52,"ask":0.55,"last":0.7,"volume_24h":40},` +
		`"venue_c":{"bid":0.5,"ask":0.41,"last":0.46,"volume_24h":7},` +
		`"venue_d":{"bid":0.39,"ask":0.44,"last":null,"volume_24h":3}},` +
		`"best_bid":0.52,"best_ask":0.41,"version":5,"updated_at":"2024-05-10T12:00:00Z"}`
	if plain != wantPlain || ident != wantPlain {
		t.Errorf("without metadata:\n got %s\nidentity everywhere:\n got %s\nwant %s", plain, ident, wantPlain)
	}
}

// TestReaderTradesInverted: a complement venue's trades are shown at
// 1 − price and marked inverted, from Redis and from the store alike, while
// the trade list caches them as the venue sent them. A trade that arrived
// before its market, and a market whose relation changes later, show the
// market's relation as it is when read.
func TestReaderTradesInverted(t *testing.T) {
	w := newReaderWorld(t)
	ctx := context.Background()
	// The listing is whole (as after a rebuild): trade lists are read from Redis.
	okKey := strings.TrimSuffix(w.seqKey, "{n}:seq") + "{i}:ok"
	if err := w.rdb.Set(ctx, okKey, "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	trade := func(id, venue string, price float64, sec int) store.Trade {
		return store.Trade{MarketID: "m3", TradeID: id, Venue: venue, Price: price, Size: 2, Side: "buy",
			TS: testNow.Add(time.Duration(sec) * time.Second)}
	}
	// The trades come first: the market is unknown, not served.
	w.write(store.Batch{Trades: []store.Trade{trade("t1", "venue_a", 0.42, 1), trade("t2", "venue_b", 0.7, 2)}}, true)
	if _, err := w.r.Trades(ctx, "m3", 10); err == nil {
		t.Fatal("trades of an unknown market: got no error")
	}
	market := func(version int64, relation string) store.Market {
		mk := activeMarket("m3", "E1")
		mk.Version = version
		mk.Venues = map[string]string{"venue_a": "A3", "venue_b": "B3"}
		mk.Matches[1] = m(relation, 0.75, "model")
		return mk
	}
	const (
		raw1 = `{"trade_id":"t1","market_id":"m3","venue":"venue_a","price":0.42,"size":2,"side":"buy","ts":"2024-05-10T12:00:01Z"}`
		raw2 = `{"trade_id":"t2","market_id":"m3","venue":"venue_b","price":0.7,"size":2,"side":"buy","ts":"2024-05-10T12:00:02Z"}`
		inv2 = `{"trade_id":"t2","market_id":"m3","venue":"venue_b","price":0.3,"size":2,"side":"buy","ts":"2024-05-10T12:00:02Z","inverted":true}`
	)
	check := func(step, layer string, want ...string) {
		t.Helper()
		before := w.reads("trades", layer)
		items, err := w.r.Trades(ctx, "m3", 10)
		if w.reads("trades", layer) <= before {
			t.Errorf("%s: not answered from %s", step, layer)
		}
		if err != nil {
			t.Fatalf("%s: Trades: %v", step, err)
		}
		if got := string(join(items)); got != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %s\nwant %s", step, got, strings.Join(want, "\n"))
		}
	}
	w.write(store.Batch{Markets: []store.Market{market(1, store.RelationComplement)}}, true)
	check("complement", "redis", inv2, raw1)
	cached, err := w.rdb.ZRevRange(ctx, w.c.TradesKey("m3"), 0, -1).Result()
	if err != nil || strings.Join(cached, "\n") != raw2+"\n"+raw1 {
		t.Errorf("cached trade list: got %q, %v; want the trades as sent", cached, err)
	}

	w.write(store.Batch{Markets: []store.Market{market(2, store.RelationIdentity)}}, true)
	check("changed to identity", "redis", raw2, raw1)
	w.write(store.Batch{Markets: []store.Market{market(3, store.RelationComplement)}}, true)
	check("changed back to complement", "redis", inv2, raw1)

	// From the store: the trade list is not trusted while the listing is
	// incomplete (Redis lost its data).
	if err := w.rdb.Del(ctx, okKey).Err(); err != nil {
		t.Fatal(err)
	}
	check("from the store", "store", inv2, raw1)
}

func join(items [][]byte) []byte {
	var out []byte
	for i, b := range items {
		if i > 0 {
			out = append(out, '\n')
		}
		out = append(out, b...)
	}
	return out
}

// TestApplyInvertedVenues: a market's price item records the venues whose
// trades it shows inverted, and a change of the market rewrites them.
func TestApplyInvertedVenues(t *testing.T) {
	c, rdb, _ := newCache(t)
	doc := priceDoc(store.Matches{m("complement", 1, "x"), nil, m("subset", 1, "x"), m("complement", 0.5, "y")}, nil)
	apply(t, c, &store.Result{Markets: []store.MarketDoc{doc}})
	if got := hash(t, rdb, c.MarketKey("m-1"))["i"]; got != "venue_a venue_d" {
		t.Errorf("inverted venues: got %q, want venue_a venue_d", got)
	}
	doc.Rev++
	doc.Market.Matches = store.Matches{}
	apply(t, c, &store.Result{Markets: []store.MarketDoc{doc}})
	if h := hash(t, rdb, c.MarketKey("m-1")); h["i"] != "" || h["g"] != "4" {
		t.Errorf("after the market changed: got %v, want revision 4 and no inverted venues", h)
	}
}

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/store"
)

// Candles from message to answer (contract §3 "Candle"): a market whose
// prices and trades were published through ingest, read back as candles,
// each bucket's figures computed by hand from the published messages.

const candlesPath = "/public/v1/markets/MKC/candles"

// candlesDay is yesterday (UTC) as "2006-01-02T": the fixture's prices and
// trades are within the 30 days 1m candles are kept.
func candlesDay() string { return time.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02T") }

// candlesFixture publishes event EVC (venues a and b) and its market MKC
// (no match metadata: both venues count for "all"), three prices, an older
// version that must be ignored, and three trades, one of them delivered
// twice.
func candlesFixture(t *testing.T, w *world, day string) {
	t.Helper()
	w.publish(t, "event", "EVC", map[string]any{"universal_id": "EVC", "version": 1, "title": "Candles event",
		"category": "politics", "status": "active", "merged_into": nil, "volume": 10.0, "updated_at": "2024-05-10T09:00:00Z",
		"venue_a_event_ticker": "A-EVC", "venue_b_event_slug": "b-evc", "venue_c_event_id": nil, "venue_d_event_id": nil})
	w.publish(t, "market", "MKC", map[string]any{"universal_id": "MKC", "event_id": "EVC", "version": 1,
		"title": "Candles market", "status": "active", "venues": map[string]string{"venue_a": "A-C", "venue_b": "b-c"},
		"updated_at": "2024-05-10T09:00:00Z"})
	q := func(bid, ask float64) map[string]any {
		return map[string]any{"bid": bid, "ask": ask, "last": nil, "volume_24h": 1}
	}
	price := func(v int, ts string, a, b map[string]any) {
		w.publish(t, "price", "MKC", map[string]any{"market_id": "MKC", "version": v, "ts": ts,
			"quotes": map[string]any{"venue_a": a, "venue_b": b}})
	}
	price(1, day+"12:00:10Z", q(0.40, 0.45), q(0.41, 0.47))
	price(2, day+"12:20:00Z", q(0.42, 0.44), q(0.41, 0.47))
	price(3, day+"13:30:00Z", q(0.38, 0.43), q(0.39, 0.46))
	price(2, day+"13:45:00Z", q(0.99, 0.99), q(0.99, 0.99)) // not newer: changes nothing
	trade := func(id, venue string, p, size float64, ts string) {
		w.publish(t, "trade", "MKC", map[string]any{"market_id": "MKC", "trade_id": id, "venue": venue,
			"price": p, "size": size, "side": "buy", "ts": ts})
	}
	trade("c1", "venue_a", 0.43, 2, day+"12:05:00Z")
	trade("c2", "venue_b", 0.46, 1, day+"12:50:00Z")
	trade("c3", "venue_a", 0.40, 3, day+"13:31:00Z")
	trade("c1", "venue_a", 0.43, 2, day+"12:05:00Z") // delivered again: counts once
}

func ohlc(o, h, l, c float64) map[string]any {
	return map[string]any{"open": o, "high": h, "low": l, "close": c}
}

func candle(start string, trades, volume float64, trade, bid, ask any) map[string]any {
	return map[string]any{"start": start, "trades": trades, "volume": volume, "trade": trade, "bid": bid, "ask": ask}
}

// candlesOf is an answer's candles; it fails the test unless it is a 200.
func candlesOf(t *testing.T, a answer) []map[string]any {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("status %d, body %s", a.status, a.body)
	}
	var body struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("body %s: %v", a.body, err)
	}
	return body.Data
}

func wantCandles(t *testing.T, what string, got, want []map[string]any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func TestCandles(t *testing.T) {
	w := newWorld(t, withIngest())
	n := w.node(t)
	secret := rtSecret(t, w)
	day := candlesDay()
	candlesFixture(t, w, day)
	w.applied(t)
	w.noRejects(t)

	rng := "from=" + day + "11:00:00Z&to=" + day + "15:00:00Z"
	// 11:00 holds nothing and nothing came before it: the answer starts
	// at 12:00. 14:00 has no update: it repeats the value in force.
	all := candlesOf(t, n.get(t, candlesPath+"?interval=1h&"+rng, secret))
	wantCandles(t, "1h all", all, []map[string]any{
		candle(day+"12:00:00Z", 2, 3, ohlc(0.43, 0.46, 0.43, 0.46), ohlc(0.41, 0.42, 0.41, 0.42), ohlc(0.45, 0.45, 0.44, 0.44)),
		candle(day+"13:00:00Z", 1, 3, ohlc(0.40, 0.40, 0.40, 0.40), ohlc(0.42, 0.42, 0.39, 0.39), ohlc(0.44, 0.44, 0.43, 0.43)),
		candle(day+"14:00:00Z", 0, 0, nil, ohlc(0.39, 0.39, 0.39, 0.39), ohlc(0.43, 0.43, 0.43, 0.43)),
	})
	b := candlesOf(t, n.get(t, candlesPath+"?interval=1h&venue=venue_b&"+rng, secret))
	wantCandles(t, "1h venue_b", b, []map[string]any{
		candle(day+"12:00:00Z", 1, 1, ohlc(0.46, 0.46, 0.46, 0.46), ohlc(0.41, 0.41, 0.41, 0.41), ohlc(0.47, 0.47, 0.47, 0.47)),
		candle(day+"13:00:00Z", 0, 0, nil, ohlc(0.41, 0.41, 0.39, 0.39), ohlc(0.47, 0.47, 0.46, 0.46)),
		candle(day+"14:00:00Z", 0, 0, nil, ohlc(0.39, 0.39, 0.39, 0.39), ohlc(0.46, 0.46, 0.46, 0.46)),
	})
	// 1m: the range starts after the first price, so its first bucket
	// opens with the value in force; an unaligned from takes its bucket.
	m := candlesOf(t, n.get(t, candlesPath+"?interval=1m&from="+day+"12:04:30Z&to="+day+"12:06:00Z", secret))
	wantCandles(t, "1m all", m, []map[string]any{
		candle(day+"12:04:00Z", 0, 0, nil, ohlc(0.41, 0.41, 0.41, 0.41), ohlc(0.45, 0.45, 0.45, 0.45)),
		candle(day+"12:05:00Z", 1, 2, ohlc(0.43, 0.43, 0.43, 0.43), ohlc(0.41, 0.41, 0.41, 0.41), ohlc(0.45, 0.45, 0.45, 0.45)),
	})
	// venue_c has no data at all.
	if a := n.get(t, candlesPath+"?venue=venue_c&"+rng, secret); a.status != http.StatusOK || string(a.body) != `{"data":[]}` {
		t.Errorf("venue_c: %d %s, want {\"data\":[]}", a.status, a.body)
	}

	// ETag/304, and the same tag on a second read (from node memory).
	first := n.get(t, candlesPath+"?"+rng, secret)
	tag := first.header.Get("ETag")
	if tag == "" {
		t.Fatal("no ETag on a candles answer")
	}
	if again := n.get(t, candlesPath+"?"+rng, secret); again.header.Get("ETag") != tag || string(again.body) != string(first.body) {
		t.Errorf("second read: tag %q body %s, want %q %s", again.header.Get("ETag"), again.body, tag, first.body)
	}
	if a := n.get(t, candlesPath+"?"+rng, secret, "If-None-Match", tag); a.status != http.StatusNotModified || len(a.body) != 0 {
		t.Errorf("If-None-Match: %d %s, want 304", a.status, a.body)
	}

	// A new trade changes the answer kept in node memory: its notice drops it.
	w.publish(t, "trade", "MKC", map[string]any{"market_id": "MKC", "trade_id": "c4", "venue": "venue_b",
		"price": 0.5, "size": 4, "side": "sell", "ts": day + "14:10:00Z"})
	w.applied(t)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := candlesOf(t, n.get(t, candlesPath+"?"+rng, secret))
		if len(got) == 3 && got[2]["trades"] == 1.0 && got[2]["volume"] == 4.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after a trade of 14:10, the 14:00 candle is %v", got[len(got)-1])
		}
	}
	if a := n.get(t, candlesPath+"?"+rng, secret, "If-None-Match", tag); a.status != http.StatusOK {
		t.Errorf("If-None-Match with the old tag after a change: %d, want 200", a.status)
	}
}

func TestCandlesRefusals(t *testing.T) {
	w := newWorld(t, withIngest())
	n := w.node(t)
	secret := rtSecret(t, w)
	candlesFixture(t, w, candlesDay())
	w.applied(t)

	for _, tc := range []struct{ query, msgHas string }{
		{"interval=2h", "interval"},
		{"interval=", "interval"},
		{"interval=1H", "interval"},
		{"from=yesterday", "from"},
		{"from=2024-05-10", "from"},
		{"to=2024-05-10T25:00:00Z", "to"},
		{"from=2024-05-10T12:00:00Z&to=2024-05-10T12:00:00Z", "from must be before to"},
		{"from=2024-05-10T13:00:00Z&to=2024-05-10T12:00:00Z", "from must be before to"},
		{"interval=1m&from=2024-05-01T00:00:00Z&to=2024-05-10T00:00:00Z", "12960 candles"},
		{"interval=1m&to=2024-05-10T00:00:00Z&from=2024-05-06T12:39:00Z", "5001 candles"},
		{"interval=1d&from=0001-01-01T00:00:00Z&to=9999-12-31T00:00:00Z", "3652058 candles"},
		{"venue=venue_e", "venue"},
		{"venue=", "venue"},
	} {
		a := n.get(t, candlesPath+"?"+tc.query, secret)
		wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", tc.msgHas)
		wantLimitHeaders(t, a, true)
	}
	// Exactly 5,000 is answered.
	if a := n.get(t, candlesPath+"?interval=1m&to=2024-05-10T00:00:00Z&from=2024-05-06T12:40:00Z", secret); a.status != http.StatusOK {
		t.Errorf("5,000 candles: %d %s", a.status, a.body)
	}
	// A bad parameter answers 422 before the market is looked up.
	wantError(t, n.get(t, "/public/v1/markets/nope/candles?interval=7m", secret), http.StatusUnprocessableEntity, "invalid_request", "interval")
	// Unknown, not an id, an event's id: as trades answers.
	for _, id := range []string{"nope", "EVC", strings.Repeat("a", 65), "a.b"} {
		a := n.get(t, "/public/v1/markets/"+id+"/candles", secret)
		wantError(t, a, http.StatusNotFound, "not_found", "")
		if tr := n.get(t, "/public/v1/markets/"+id+"/trades", secret); tr.status != a.status {
			t.Errorf("%s: candles %d, trades %d", id, a.status, tr.status)
		}
	}
	// Scope: a key without markets:read.
	other, _ := w.newKey(t, keyOpts{scopes: []string{store.ScopeAccountRead}})
	wantError(t, n.get(t, candlesPath, other), http.StatusForbidden, "insufficient_scope", "")
}

func TestCandlesUsage(t *testing.T) {
	w := newWorld(t, withIngest())
	n := w.node(t)
	account := w.account(t, true)
	secret, _ := w.key(t, account, keyOpts{scopes: usageScopes})
	candlesFixture(t, w, candlesDay())
	w.applied(t)
	for i := range 3 {
		n.get(t, candlesPath+fmt.Sprintf("?interval=%s", []string{"1h", "1m", "bad"}[i]), secret)
	}
	waitUsage(t, w, account, map[string]int64{today(w) + " candles": 3})
}

// countedCandles counts the candle reads that reach the store, each held
// for a moment so that concurrent requests meet.
type countedCandles struct {
	store api.Candles
	reads atomic.Int64
}

func (c *countedCandles) Candles(ctx context.Context, marketID, interval, series string, from, to time.Time) ([]store.Candle, error) {
	c.reads.Add(1)
	time.Sleep(200 * time.Millisecond) // a slow read: the others arrive while it runs
	return c.store.Candles(ctx, marketID, interval, series, from, to)
}

// TestCandlesOneReadForConcurrentMisses: requests for the same candles that
// miss node memory together share one read of Postgres (a chart many clients
// poll would otherwise send them all there each time its answer expires),
// and all get the same answer.
func TestCandlesOneReadForConcurrentMisses(t *testing.T) {
	counted := &countedCandles{}
	w := newWorld(t, withIngest())
	n := w.node(t, withCandles(func(c api.Candles) api.Candles { counted.store = c; return counted }))
	secret := rtSecret(t, w)
	day := candlesDay()
	candlesFixture(t, w, day)
	w.applied(t)
	path := candlesPath + "?interval=1h&from=" + day + "11:00:00Z&to=" + day + "15:00:00Z"
	const clients = 16
	answers := make([]answer, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = n.get(t, path, secret)
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a.status != http.StatusOK || string(a.body) != string(answers[0].body) {
			t.Fatalf("client %d: %d %s, want 200 and client 0's %s", i, a.status, a.body, answers[0].body)
		}
	}
	if got := counted.reads.Load(); got != 1 {
		t.Errorf("%d concurrent misses read the store %d times, want once", clients, got)
	}
}

// TestCandlesAcrossNodes: two nodes give the same candles with the same
// ETag (a hash of the body), so a client's tag from one node answers 304 on
// the other; after a trade, both show it within the 2 s bound.
func TestCandlesAcrossNodes(t *testing.T) {
	w := newWorld(t, withIngest())
	a, b := w.node(t), w.node(t)
	secret := rtSecret(t, w)
	day := candlesDay()
	candlesFixture(t, w, day)
	w.applied(t)
	path := candlesPath + "?interval=1h&from=" + day + "11:00:00Z&to=" + day + "15:00:00Z"
	fromA, fromB := a.get(t, path, secret), b.get(t, path, secret)
	if fromA.status != http.StatusOK || string(fromA.body) != string(fromB.body) || fromA.header.Get("ETag") != fromB.header.Get("ETag") {
		t.Fatalf("node A: %d %q %s\nnode B: %d %q %s\nwant the same answer and tag", fromA.status, fromA.header.Get("ETag"), fromA.body,
			fromB.status, fromB.header.Get("ETag"), fromB.body)
	}
	if got := b.get(t, path, secret, "If-None-Match", fromA.header.Get("ETag")); got.status != http.StatusNotModified {
		t.Errorf("node B with node A's ETag: %d, want 304", got.status)
	}
	w.publish(t, "trade", "MKC", map[string]any{"market_id": "MKC", "trade_id": "x9", "venue": "venue_a",
		"price": 0.5, "size": 2, "side": "buy", "ts": day + "14:20:00Z"})
	w.applied(t)
	for _, n := range []*node{a, b} {
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got := candlesOf(t, n.get(t, path, secret))
			if len(got) == 3 && got[2]["trades"] == 1.0 && got[2]["volume"] == 2.0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s: 2 s after a trade of 14:20, the 14:00 candle is %v", n.base, got[len(got)-1])
			}
		}
	}
}

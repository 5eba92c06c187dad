package ingest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/cache/cachetest"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func eventMsg(id string, version int, title string, venues ...any) map[string]any {
	m := map[string]any{
		"universal_id": id, "version": version, "title": title, "category": "politics",
		"status": "active", "merged_into": nil, "venue_a_event_ticker": nil, "venue_b_event_slug": nil,
		"venue_c_event_id": nil, "venue_d_event_id": nil, "volume": 1500.5,
		"updated_at": "2026-11-01T10:00:00.123456Z",
	}
	names := []string{"venue_a_event_ticker", "venue_b_event_slug", "venue_c_event_id", "venue_d_event_id"}
	for i, v := range venues {
		m[names[i]] = v
	}
	return m
}

// TestApplyEachKind publishes one message of each kind and checks the rows in
// Postgres and the documents in Redis, byte for byte.
func TestApplyEachKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	notices := make(chan *nats.Msg, 64)
	sub, err := e.nc.ChanSubscribe(e.cfg.NoticeSubject, notices)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // the test's connection closes when it ends, and the subscription with it
	e.startWorker(t)
	ctx := context.Background()

	e.publish(t, e.subject("event", "EV-1"), mustJSON(t, eventMsg("EV-1", 3, "Fed cut in March?", "KXFED-27MAR", "fed-cut-march", nil, nil)), "e1")
	e.publish(t, e.subject("market", "MK-1"), mustJSON(t, map[string]any{
		"universal_id": "MK-1", "event_id": "EV-1", "version": 1, "title": "25 bp cut", "status": "active",
		"venues":      map[string]string{"venue_a": "KXFED-27MAR-25", "venue_b": "fed-cut-25"},
		"resolved_at": nil, "result": nil, "updated_at": "2026-11-01T10:00:01Z",
	}), "m1")
	e.publish(t, e.subject("price", "MK-1"), mustJSON(t, map[string]any{
		"market_id": "MK-1", "version": 7, "ts": "2026-11-01T10:00:02.5Z",
		"quotes": map[string]any{
			"venue_a": map[string]any{"bid": 0.41, "ask": 0.44, "last": 0.42, "volume_24h": 1200},
			"venue_b": map[string]any{"bid": 0.43, "ask": 0.47, "last": nil, "volume_24h": 0},
		},
	}), "p1")
	e.publish(t, e.subject("trade", "MK-1"), mustJSON(t, map[string]any{
		"market_id": "MK-1", "trade_id": "T-1", "venue": "venue_b", "price": 0.45, "size": 10,
		"side": "buy", "ts": "2026-11-01T10:00:03.000001Z",
	}), "t1")
	e.waitDrained(t, 15*time.Second)

	var title string
	var version int64
	if err := e.pool.QueryRow(ctx, `SELECT title, version FROM events WHERE universal_id = 'EV-1'`).Scan(&title, &version); err != nil {
		t.Fatal(err)
	}
	if title != "Fed cut in March?" || version != 3 {
		t.Errorf("events row: got (%q, %d), want (%q, 3)", title, version, "Fed cut in March?")
	}
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM markets m JOIN prices p ON p.market_id = m.universal_id JOIN trades t ON t.market_id = m.universal_id`).Scan(&n); err != nil || n != 1 {
		t.Errorf("market+price+trade rows: got %d (%v), want 1", n, err)
	}

	ev, err := cachetest.Event(ctx, e.rdb, e.cache, "EV-1")
	if err != nil {
		t.Fatal(err)
	}
	wantEvent := `{"universal_id":"EV-1","title":"Fed cut in March?","category":"politics","status":"active",` +
		`"venue_a_event_ticker":"KXFED-27MAR","venue_b_event_slug":"fed-cut-march","venue_c_event_id":null,"venue_d_event_id":null,` +
		`"venue_count":2,"volume":1500.5,"updated_at":"2026-11-01T10:00:00.123456Z","matches":{"venue_a":null,"venue_b":null},` +
		`"markets":[{"universal_id":"MK-1","event_id":"EV-1","title":"25 bp cut","status":"active","venues":{"venue_a":"KXFED-27MAR-25","venue_b":"fed-cut-25"},` +
		`"matches":{"venue_a":null,"venue_b":null}}],` +
		`"recently_resolved":[]}`
	if string(ev.Body) != wantEvent {
		t.Errorf("event document:\n got %s\nwant %s", ev.Body, wantEvent)
	}
	ms, err := e.cache.Markets(ctx, []string{"MK-1"})
	if err != nil {
		t.Fatal(err)
	}
	wantPrice := `{"market_id":"MK-1","event_id":"EV-1","status":"active","quotes":{` +
		`"venue_a":{"bid":0.41,"ask":0.44,"last":0.42,"volume_24h":1200},` +
		`"venue_b":{"bid":0.43,"ask":0.47,"last":null,"volume_24h":0}},` +
		`"best_bid":0.43,"best_ask":0.44,"version":7,"updated_at":"2026-11-01T10:00:02.5Z"}`
	if !ms[0].Served || string(ms[0].Body) != wantPrice {
		t.Errorf("price item (served %v):\n got %s\nwant %s", ms[0].Served, ms[0].Body, wantPrice)
	}
	trades, err := cachetest.Trades(ctx, e.rdb, e.cache, "MK-1", 50)
	if err != nil {
		t.Fatal(err)
	}
	wantTrade := `{"trade_id":"T-1","market_id":"MK-1","venue":"venue_b","price":0.45,"size":10,"side":"buy","ts":"2026-11-01T10:00:03.000001Z"}`
	if len(trades) != 1 || string(trades[0]) != wantTrade {
		t.Errorf("trades: got %q, want [%s]", trades, wantTrade)
	}
	ids, summaries, err := cachetest.ListPage(ctx, e.rdb, e.cache, cache.SetName("politics", "venue_b", "2"), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	wantSummary := `{"universal_id":"EV-1","title":"Fed cut in March?","category":"politics","status":"active",` +
		`"venue_a_event_ticker":"KXFED-27MAR","venue_b_event_slug":"fed-cut-march","venue_c_event_id":null,"venue_d_event_id":null,` +
		`"venue_count":2,"volume":1500.5,"updated_at":"2026-11-01T10:00:00.123456Z","matches":{"venue_a":null,"venue_b":null}}`
	if len(ids) != 1 || ids[0] != "EV-1" || string(summaries[0]) != wantSummary {
		t.Errorf("listing politics/venue_b: got %v %q, want [EV-1] [%s]", ids, summaries, wantSummary)
	}
	if ids, _, _ := cachetest.ListPage(ctx, e.rdb, e.cache, cache.SetName("", "venue_c", ""), "", 10); len(ids) != 0 {
		t.Errorf("listing venue_c: got %v, want none", ids)
	}

	// Change notices name what was rewritten.
	seen := map[string]bool{}
	for len(notices) > 0 {
		var n notice.Change
		if err := json.Unmarshal((<-notices).Data, &n); err != nil {
			t.Fatalf("notice: %v", err)
		}
		if n.Seq == 0 {
			t.Errorf("change notice %+v without the change number its write took", n)
		}
		for _, id := range n.Events {
			seen["event:"+id] = true
		}
		for _, id := range n.Markets {
			seen["market:"+id] = true
		}
		for _, id := range n.Trades {
			seen["trades:"+id] = true
		}
	}
	for _, want := range []string{"event:EV-1", "market:MK-1", "trades:MK-1"} {
		if !seen[want] {
			t.Errorf("change notices: %s missing from %v", want, seen)
		}
	}
}

// TestVersionRules: replays, an older version after a newer one and equal
// versions change nothing, in Postgres and in Redis.
func TestVersionRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(t)
	ctx := context.Background()
	pub := func(version int, title, id string) {
		e.publish(t, e.subject("event", "EV-9"), mustJSON(t, eventMsg("EV-9", version, title, "A", "B")), id)
	}
	pub(5, "five", "a")
	e.waitDrained(t, 10*time.Second)
	before, err := cachetest.Event(ctx, e.rdb, e.cache, "EV-9")
	if err != nil {
		t.Fatal(err)
	}

	pub(4, "four (older, late)", "b")
	pub(5, "five again, other content", "c")
	pub(5, "five", "d") // a replay under a new message id
	e.waitDrained(t, 10*time.Second)

	var title string
	var version int64
	if err := e.pool.QueryRow(ctx, `SELECT title, version FROM events WHERE universal_id = 'EV-9'`).Scan(&title, &version); err != nil {
		t.Fatal(err)
	}
	if title != "five" || version != 5 {
		t.Errorf("events row: got (%q, %d), want (five, 5)", title, version)
	}
	after, err := cachetest.Event(ctx, e.rdb, e.cache, "EV-9")
	if err != nil {
		t.Fatal(err)
	}
	if string(after.Body) != string(before.Body) {
		t.Errorf("event document changed:\n got %s\nwant %s", after.Body, before.Body)
	}

	pub(6, "six", "e")
	e.waitDrained(t, 10*time.Second)
	after, err = cachetest.Event(ctx, e.rdb, e.cache, "EV-9")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Title string }
	if err := json.Unmarshal(after.Body, &doc); err != nil || doc.Title != "six" {
		t.Errorf("after version 6: title %q (%v), want six", doc.Title, err)
	}
}

// TestLateCacheWrite: a batch whose cache write is delayed past a newer
// batch's (two workers racing) must not replace the newer documents.
func TestLateCacheWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	apply := func(version int64, title string) *store.Result {
		t.Helper()
		ev := store.Event{ID: "EV-L", Version: version, Title: title, Category: "c", Status: "active",
			VenueIDs: [4]*string{ptr("A"), ptr("B"), nil, nil}, UpdatedAt: time.Unix(1e9, 0).UTC()}
		res, err := e.st.ApplyBatch(ctx, &store.Batch{Events: []store.Event{ev}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	older, newer := apply(1, "older"), apply(2, "newer")
	if _, err := e.cache.Apply(ctx, newer); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cache.Apply(ctx, older); err != nil {
		t.Fatal(err)
	}
	got, err := cachetest.Event(ctx, e.rdb, e.cache, "EV-L")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Title string }
	if err := json.Unmarshal(got.Body, &doc); err != nil || doc.Title != "newer" {
		t.Errorf("event document title after a late older write: got %q (%v), want newer", doc.Title, err)
	}
	ids, sums, err := cachetest.ListPage(ctx, e.rdb, e.cache, cache.SetName("c", "", ""), "", 10)
	if err != nil || len(ids) != 1 || !strings.Contains(string(sums[0]), `"title":"newer"`) {
		t.Errorf("listing after a late older write: got %v %q (%v), want the newer summary", ids, sums, err)
	}
}

func ptr[T any](v T) *T { return &v }

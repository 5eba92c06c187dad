package api_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Match metadata from message to answer (contract §3 "Match metadata", §4):
// published with events and markets, carried by event summaries, event
// reads and markets, applied to prices and trades, on two nodes.

func rtMatch(relation string, confidence float64, method string) map[string]any {
	return map[string]any{"relation": relation, "confidence": confidence, "method": method}
}

// matchesFixture publishes: EVM (venues a, b, c; identity, complement, no
// metadata) with market MKM (venues a–d: identity, complement, subset, no
// metadata) and market MKP (no metadata at all); EVL, an event whose links
// are weak. MKM's ladders cross: venue_b's inverted bid (1 − 0.55) beats the
// others, and venue_c, a subset, has the best raw quote on both sides.
func matchesFixture(t *testing.T, w *world) {
	t.Helper()
	event := func(id string, venues []string, matches map[string]any) {
		b := map[string]any{"universal_id": id, "version": 1, "title": "Matched " + id, "category": "politics",
			"status": "active", "merged_into": nil, "volume": 100.5, "updated_at": "2024-05-10T09:00:00Z"}
		for i, f := range []string{"venue_a_event_ticker", "venue_b_event_slug", "venue_c_event_id", "venue_d_event_id"} {
			b[f] = nil
			if venues[i] != "" {
				b[f] = venues[i]
			}
		}
		if matches != nil {
			b["matches"] = matches
		}
		w.publish(t, "event", id, b)
	}
	event("EVM", []string{"A-EVM", "b-evm", "c_evm", ""}, map[string]any{
		"venue_a": rtMatch("identity", 0.97, "rules"), "venue_b": rtMatch("complement", 0.8, "model")})
	event("EVL", []string{"A-EVL", "", "", "d-evl"}, map[string]any{
		"venue_a": rtMatch("overlap", 0.2, "model"), "venue_d": rtMatch("identity", 0.35, "manual")})
	w.publish(t, "market", "MKM", mkMatchesMsg(1, "complement"))
	w.publish(t, "market", "MKP", map[string]any{"universal_id": "MKP", "event_id": "EVM", "version": 1,
		"title": "Plain", "status": "active", "venues": map[string]string{"venue_a": "A-P", "venue_b": "b-p"},
		"updated_at": "2024-05-10T09:00:00Z"})

	q := func(bid, ask, last any, vol float64) map[string]any {
		return map[string]any{"bid": bid, "ask": ask, "last": last, "volume_24h": vol}
	}
	w.publish(t, "price", "MKM", map[string]any{"market_id": "MKM", "version": 1, "ts": "2024-05-10T12:00:00Z",
		"quotes": map[string]any{
			"venue_a": q(0.40, 0.45, 0.42, 100), "venue_b": q(0.52, 0.55, 0.7, 40),
			"venue_c": q(0.50, 0.41, 0.46, 7), "venue_d": q(0.39, 0.44, nil, 3),
		}})
	w.publish(t, "price", "MKP", map[string]any{"market_id": "MKP", "version": 1, "ts": "2024-05-10T12:00:00Z",
		"quotes": map[string]any{"venue_a": q(0.3, 0.35, nil, 1), "venue_b": q(0.31, 0.36, 0.33, 2)}})
	for i, v := range []string{"venue_a", "venue_b", "venue_c", "venue_d"} {
		for _, mk := range []string{"MKM", "MKP"} {
			w.publish(t, "trade", mk, map[string]any{"market_id": mk, "trade_id": fmt.Sprintf("%s-%d", mk, i), "venue": v,
				"price": []float64{0.42, 0.7, 0.5, 0.445}[i], "size": 1.5, "side": "buy",
				"ts": fmt.Sprintf("2024-05-10T12:00:0%dZ", i)})
		}
	}
}

// mkMatchesMsg is market MKM at version with venue_b's relation.
func mkMatchesMsg(version int, relationB string) map[string]any {
	return map[string]any{"universal_id": "MKM", "event_id": "EVM", "version": version, "title": "Matched market",
		"status": "active", "venues": map[string]string{"venue_a": "A-M", "venue_b": "b-m", "venue_c": "c-m", "venue_d": "d-m"},
		"updated_at": "2024-05-10T09:00:00Z", "matches": map[string]any{
			"venue_a": rtMatch("identity", 1, "rules"), "venue_b": rtMatch(relationB, 0.9, "manual"),
			"venue_c": rtMatch("subset", 0.6, "model"), "venue_d": nil,
		}}
}

func TestMatchesFromMessageToAnswer(t *testing.T) {
	w := newWorld(t, withIngest())
	nodes := []*node{w.node(t), w.node(t)}
	secret := rtSecret(t, w)
	matchesFixture(t, w)
	w.settle(t, secret, nodes...)
	w.noRejects(t)

	const summary = `{"universal_id":"EVM","title":"Matched EVM","category":"politics","status":"active",` +
		`"venue_a_event_ticker":"A-EVM","venue_b_event_slug":"b-evm","venue_c_event_id":"c_evm","venue_d_event_id":null,` +
		`"venue_count":3,"volume":100.5,"updated_at":"2024-05-10T09:00:00Z",` +
		`"matches":{"venue_a":{"relation":"identity","confidence":0.97,"method":"rules"},` +
		`"venue_b":{"relation":"complement","confidence":0.8,"method":"model"},"venue_c":null}}`
	const priceMKM = `{"market_id":"MKM","event_id":"EVM","status":"active","quotes":{` +
		`"venue_a":{"bid":0.4,"ask":0.45,"last":0.42,"volume_24h":100},` +
		`"venue_b":{"bid":0.45,"ask":0.48,"last":0.3,"volume_24h":40,"inverted":true},` +
		`"venue_c":{"bid":0.5,"ask":0.41,"last":0.46,"volume_24h":7},` +
		`"venue_d":{"bid":0.39,"ask":0.44,"last":null,"volume_24h":3}},` +
		`"best_bid":0.45,"best_ask":0.44,"version":1,"updated_at":"2024-05-10T12:00:00Z"}`
	for i, n := range nodes {
		what := fmt.Sprintf("node %d: ", i)
		list := n.get(t, "/public/v1/events", secret)
		rtWant200(t, list)
		if raws := rtRawItems(t, list); len(raws) != 2 || string(raws[0]) != `{"universal_id":"EVL","title":"Matched EVL","category":"politics","status":"active",`+
			`"venue_a_event_ticker":"A-EVL","venue_b_event_slug":null,"venue_c_event_id":null,"venue_d_event_id":"d-evl",`+
			`"venue_count":2,"volume":100.5,"updated_at":"2024-05-10T09:00:00Z",`+
			`"matches":{"venue_a":{"relation":"overlap","confidence":0.2,"method":"model"},`+
			`"venue_d":{"relation":"identity","confidence":0.35,"method":"manual"}}}` || string(raws[1]) != summary {
			t.Errorf("%slisting: %s", what, list.body)
		}
		search := n.get(t, "/public/v1/markets/search?q=matched", secret)
		var found []map[string]any
		for _, id := range w.model.search("matched", 20) {
			found = append(found, w.model.summary(id))
		}
		if len(found) != 2 {
			t.Fatalf("model search: %d events, want 2", len(found))
		}
		rtWantItems(t, search, found, rtSummaryKeys)

		read := n.get(t, "/public/v1/events/EVM", secret)
		rtWant200(t, read)
		rtWantObject(t, what+"EVM", read.body, w.model.eventRead("EVM"), rtEventKeys)
		if !strings.HasPrefix(string(read.body), strings.TrimSuffix(summary, "}")+`,"markets":[{"universal_id":"MKM",`) {
			t.Errorf("%sevent read: %s", what, read.body)
		}
		if want := `"venues":{"venue_a":"A-M","venue_b":"b-m","venue_c":"c-m","venue_d":"d-m"},"matches":{` +
			`"venue_a":{"relation":"identity","confidence":1,"method":"rules"},` +
			`"venue_b":{"relation":"complement","confidence":0.9,"method":"manual"},` +
			`"venue_c":{"relation":"subset","confidence":0.6,"method":"model"},"venue_d":null}}`; !strings.Contains(string(read.body), want) {
			t.Errorf("%sevent read's market MKM: %s\nwant it to hold %s", what, read.body, want)
		}
		if want := `"venues":{"venue_a":"A-P","venue_b":"b-p"},"matches":{"venue_a":null,"venue_b":null}}`; !strings.Contains(string(read.body), want) {
			t.Errorf("%sevent read's market MKP: %s\nwant it to hold %s", what, read.body, want)
		}

		snap := n.get(t, "/public/v1/prices/snapshot?ids=MKM,MKP", secret)
		rtWantSnapshot(t, w, snap, []string{"MKM", "MKP"})
		if !strings.HasPrefix(string(snap.body), `{"data":[`+priceMKM+`,`) {
			t.Errorf("%ssnapshot: %s\nwant MKM first as %s", what, snap.body, priceMKM)
		}
		for _, mk := range []string{"MKM", "MKP"} {
			tr := n.get(t, "/public/v1/markets/"+mk+"/trades", secret)
			rtWantItems(t, tr, w.model.tradeList(mk), rtTradeKeys)
		}
		if tr := n.get(t, "/public/v1/markets/MKM/trades?limit=3", secret); !strings.Contains(string(tr.body),
			`{"trade_id":"MKM-1","market_id":"MKM","venue":"venue_b","price":0.3,"size":1.5,"side":"buy","ts":"2024-05-10T12:00:01Z","inverted":true}`) {
			t.Errorf("%strades: %s, want MKM-1 inverted", what, tr.body)
		}
	}

	// A later market message that makes venue_b an identity venue shows its
	// quote and its trades, cached before, as the venue sent them; back to
	// complement, inverted again.
	for _, step := range []struct {
		version  int
		relation string
	}{{2, "identity"}, {3, "complement"}} {
		w.publish(t, "market", "MKM", mkMatchesMsg(step.version, step.relation))
		w.applied(t)
		for i, n := range nodes {
			eventually(t, fmt.Sprintf("node %d, venue_b %s", i, step.relation), func() string {
				snap := n.get(t, "/public/v1/prices/snapshot?ids=MKM", secret)
				tr := n.get(t, "/public/v1/markets/MKM/trades", secret)
				return rtDiff(w, snap, tr)
			})
		}
	}
}

// rtDiff says how a snapshot of MKM and its trades differ from the model ("" when they do not).
func rtDiff(w *world, snap, trades answer) string {
	want, _ := w.model.price("MKM")
	var s rtSnapshot
	if err := json.Unmarshal(snap.body, &s); err != nil || len(s.Data) != 1 {
		return fmt.Sprintf("snapshot %s", snap.body)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Data[0], &got); err != nil || !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("price %s, want %v", s.Data[0], want)
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(trades.body, &list); err != nil || !reflect.DeepEqual(list.Data, w.model.tradeList("MKM")) {
		return fmt.Sprintf("trades %s, want %v", trades.body, w.model.tradeList("MKM"))
	}
	return ""
}

// eventually polls check until it returns "" (within 10 s): nodes apply
// change notices a moment after ingest acknowledges.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if last = check(); last == "" {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling the nodes' answers
	}
	t.Errorf("%s: %s", what, last)
}

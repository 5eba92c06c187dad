package api_test

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/ingest"
)

func TestTrades(t *testing.T) {
	w, nodes, secret := rtSetup(t, 1)
	n := nodes[0]
	all := w.model.tradeList("M-a")
	if len(all) != 205 {
		t.Fatalf("model has %d trades of M-a, want 205", len(all))
	}
	// Known expectations, independent of the model: trade i is at second
	// i/3 with id prefix t_, T, t for i%3 = 0, 1, 2; 204 is alone in the newest
	// second, then 201..203 share one (trade_id desc: "t_" > "t2" > "T2").
	var first []string
	for _, it := range all[:6] {
		first = append(first, it["trade_id"].(string))
	}
	if want := []string{"t_204", "t_201", "t203", "T202", "t_198", "t200"}; !reflect.DeepEqual(first, want) {
		t.Errorf("model order %q, want %q", first, want)
	}

	for _, tc := range []struct {
		query string
		n     int
	}{
		{"", 50}, {"?limit=1", 1}, {"?limit=3", 3}, {"?limit=200", 200}, {"?limit=0200", 200}, {"?limit=199", 199},
	} {
		a := n.get(t, "/public/v1/markets/M-a/trades"+tc.query, secret)
		rtWant200(t, a)
		rtWantItems(t, a, all[:tc.n], rtTradeKeys)
		if keys := rtKeys(t, a.body); !reflect.DeepEqual(keys, []string{"data"}) {
			t.Errorf("%q: keys %q, want [data]", tc.query, keys)
		}
	}
	for _, id := range []string{"m-b", "r1", "rv-1"} {
		a := n.get(t, "/public/v1/markets/"+id+"/trades", secret)
		rtWant200(t, a)
		rtWantItems(t, a, w.model.tradeList(id), rtTradeKeys)
	}
	if a := n.get(t, "/public/v1/markets/m-b/trades", secret); string(a.body) != `{"data":[]}` {
		t.Errorf("no trades: %s, want {\"data\":[]}", a.body)
	}

	for _, bad := range []string{"0", "201", "-1", "1.5", "abc", "", "1000000"} {
		a := n.get(t, "/public/v1/markets/M-a/trades?limit="+bad, secret)
		wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", "limit")
		wantLimitHeaders(t, a, true)
	}
	// Unserved: market of a merged or 1-venue event, resolved beyond
	// retention, unknown, an event's id, not an id.
	for _, id := range []string{"mm-1", "sm-1", "r-old", "nope", "E-main", strings.Repeat("a", 65), "a.b"} {
		a := n.get(t, "/public/v1/markets/"+id+"/trades", secret)
		wantError(t, a, http.StatusNotFound, "not_found", "")
		wantLimitHeaders(t, a, true)
	}
}

// tradeList is a market's trades, newest first: ts desc, then trade_id desc.
func (m *rtModel) tradeList(id string) []map[string]any {
	ts := slices.Clone(m.trades[id])
	slices.SortFunc(ts, func(a, b ingest.TradeMsg) int {
		if c := rtTime(*b.TS).Compare(rtTime(*a.TS)); c != 0 {
			return c
		}
		return strings.Compare(*b.TradeID, *a.TradeID)
	})
	out := []map[string]any{}
	for _, t := range ts {
		it := map[string]any{"trade_id": *t.TradeID, "market_id": id, "venue": *t.Venue,
			"price": *t.Price, "size": *t.Size, "side": *t.Side, "ts": rtUTC(*t.TS)}
		if m.relation(id, *t.Venue) == "complement" {
			it["price"], it["inverted"] = *rtInvert(t.Price), true
		}
		out = append(out, rtNorm(it))
	}
	return out
}

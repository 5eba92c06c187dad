package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// rtSnapshot is a /prices/snapshot answer.
type rtSnapshot struct {
	Data    []json.RawMessage `json:"data"`
	Missing []string          `json:"missing"`
}

// rtWantSnapshot checks a snapshot of ids against the model: data and missing
// in request order (duplicates once), every price item exact.
func rtWantSnapshot(t *testing.T, w *world, a answer, ids []string) {
	t.Helper()
	rtWant200(t, a)
	if keys := rtKeys(t, a.body); !reflect.DeepEqual(keys, []string{"data", "missing"}) {
		t.Errorf("keys = %q, want [data missing]", keys)
	}
	var s rtSnapshot
	if err := json.Unmarshal(a.body, &s); err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	wantMissing := []string{}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if p, ok := w.model.price(id); ok {
			want = append(want, p)
		} else {
			wantMissing = append(wantMissing, id)
		}
	}
	if !reflect.DeepEqual(s.Missing, wantMissing) {
		t.Errorf("missing = %q, want %q", s.Missing, wantMissing)
	}
	if len(s.Data) != len(want) {
		t.Fatalf("%d prices, want %d: %s", len(s.Data), len(want), a.body)
	}
	for i, raw := range s.Data {
		rtWantObject(t, fmt.Sprintf("price %d", i), raw, want[i], rtPriceKeys)
	}
}

func TestSnapshot(t *testing.T) {
	w, nodes, secret := rtSetup(t, 1)
	n := nodes[0]
	get := func(ids string) answer {
		return n.get(t, "/public/v1/prices/snapshot?ids="+url.QueryEscape(ids), secret)
	}

	// Known expectations, independent of the model.
	a := get("M-a")
	var s struct {
		Data []struct {
			BestBid float64 `json:"best_bid"`
			BestAsk float64 `json:"best_ask"`
			Version int64   `json:"version"`
		} `json:"data"`
	}
	json.Unmarshal(a.body, &s) //nolint:errcheck // shape checked below
	if len(s.Data) != 1 || s.Data[0].BestBid != 0.41 || s.Data[0].BestAsk != 0.44 || s.Data[0].Version != 2 {
		t.Errorf("M-a: %s; want best_bid 0.41 (max bid), best_ask 0.44 (min ask), version 2", a.body)
	}

	for _, tc := range []struct {
		name, ids   string
		data, empty int
	}{
		{"served, unserved, unknown, no price", "M-a,m_c,nope,mm-1,r1,sm-1,r-old,rv-1,m-b", 4, 5},
		{"request order", "rv-1,m-b,M-a,r1", 4, 0},
		{"reverse order", "r1,M-a,m-b,rv-1", 4, 0},
		{"duplicates", "m-b,M-a,m-b,nope,M-a,nope", 2, 1},
		{"only missing", "nope,m_c,r8x", 0, 3},
		{"resolved recently is served", "r1,r2", 1, 1},
		{"id of an event", "E-main", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := strings.Split(tc.ids, ",")
			a := get(tc.ids)
			rtWantSnapshot(t, w, a, ids)
			var s rtSnapshot
			json.Unmarshal(a.body, &s) //nolint:errcheck // checked above
			if len(s.Data) != tc.data || len(s.Missing) != tc.empty {
				t.Errorf("%d prices and %d missing, want %d and %d", len(s.Data), len(s.Missing), tc.data, tc.empty)
			}
		})
	}

	fifty := []string{"M-a"}
	for i := range 49 {
		fifty = append(fifty, fmt.Sprintf("x%02d", i))
	}
	withDups := append(append([]string{}, fifty...), fifty[:30]...)
	withDups = append(withDups, "M-a", "M-a", "x00")
	a = get(strings.Join(withDups, ","))
	rtWantSnapshot(t, w, a, withDups)

	for _, tc := range []struct{ name, query string }{
		{"51 distinct", "ids=" + strings.Join(append(fifty, "x99"), ",")},
		{"51 distinct among duplicates", "ids=" + strings.Join(append(withDups, "x99"), ",")},
		{"empty", "ids="},
		{"absent", ""},
		{"empty item", "ids=a,,b"},
		{"leading comma", "ids=,a"},
		{"trailing comma", "ids=a,"},
		{"only a comma", "ids=,"},
		{"dot", "ids=a.b"},
		{"space", "ids=" + url.QueryEscape("a b")},
		{"non-ASCII", "ids=" + url.QueryEscape("é")},
		{"65 characters", "ids=" + strings.Repeat("a", 65)},
	} {
		a := n.get(t, "/public/v1/prices/snapshot?"+tc.query, secret)
		wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", "ids")
		wantLimitHeaders(t, a, true)
	}
	// The longest valid request: 50 distinct ids of 64 characters.
	var longest []string
	for i := range 50 {
		longest = append(longest, fmt.Sprintf("%064d", i))
	}
	rtWantSnapshot(t, w, get(strings.Join(longest, ",")), longest)
	// ... sent by a client with a few KiB of ordinary headers besides.
	a = n.get(t, "/public/v1/prices/snapshot?ids="+url.QueryEscape(strings.Join(longest, ",")), secret,
		"User-Agent", strings.Repeat("u", 1024), "Accept-Language", strings.Repeat("l", 1024), "X-Trace", strings.Repeat("x", 1024))
	rtWantSnapshot(t, w, a, longest)
	rtWantSnapshot(t, w, get(longest[0]+","+longest[0]), longest[:1])
}

func (m *rtModel) marketServed(id string) bool {
	mk := m.markets[id]
	return mk != nil && m.served(*mk.EventID) && (*mk.Status == "active" || rtRecent(mk))
}

// price is the expected price item of a market, false when it is missing.
func (m *rtModel) price(id string) (map[string]any, bool) {
	p := m.prices[id]
	if !m.marketServed(id) || p == nil {
		return nil, false
	}
	var bid, ask *float64
	quotes := map[string]any{}
	for v, q := range p.Quotes {
		// A complement venue's quote in the market's terms; the best prices
		// leave out subset, superset and overlap venues (contract §3).
		rel := m.relation(id, v)
		qb, qa := q.Bid, q.Ask
		shown := map[string]any{"bid": q.Bid, "ask": q.Ask, "last": q.Last, "volume_24h": *q.Volume24h}
		if rel == "complement" {
			qb, qa = rtInvert(q.Ask), rtInvert(q.Bid)
			shown = map[string]any{"bid": qb, "ask": qa, "last": rtInvert(q.Last), "volume_24h": *q.Volume24h, "inverted": true}
		}
		quotes[v] = shown
		if rel != "" && rel != "identity" && rel != "complement" {
			continue
		}
		if qb != nil && (bid == nil || *qb > *bid) {
			bid = qb
		}
		if qa != nil && (ask == nil || *qa < *ask) {
			ask = qa
		}
	}
	mk := m.markets[id]
	return rtNorm(map[string]any{"market_id": id, "event_id": *mk.EventID, "status": *mk.Status,
		"quotes": quotes, "best_bid": bid, "best_ask": ask, "version": *p.Version, "updated_at": rtUTC(*p.TS)}), true
}

package world

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

const testPrefix = "t." + ingest.DefaultSubjectPrefix

func testHistory(t *testing.T) (*ReadsWorld, *CandleHistory) {
	t.Helper()
	w := NewReadsWorld(30, 5, 7)
	ids := ReadsInputsOf(w).CandleMarkets[:3]
	from, to := CandleWindow(w.At)
	h, err := NewCandleHistory(w, ids, from, to, testPrefix, 7)
	if err != nil {
		t.Fatal(err)
	}
	return w, h
}

// TestCandleHistory checks what ingest is given: valid messages, each
// market's price versions going on from the loaded one in ts order, every
// ts within the window, and every hour of every market with prices and
// trades (so each of the route's candles has some).
func TestCandleHistory(t *testing.T) {
	w, h := testHistory(t)
	if got, want := h.From, w.At.UTC().Truncate(time.Hour).Add(-CandleHours*time.Hour); !got.Equal(want) {
		t.Fatalf("from %s, want %s", got, want)
	}
	if !w.At.Before(h.To.Add(time.Hour)) || w.At.Before(h.To) {
		t.Fatalf("to %s is not the hour of the world's time %s", h.To, w.At)
	}
	type hourKey struct {
		market string
		hour   time.Time
	}
	prices, trades := map[hourKey]int{}, map[hourKey]int{}
	version := map[string]int64{}
	last := map[string]time.Time{}
	ids := map[string]bool{}
	for i, m := range h.Msgs {
		if ids[m.MsgID] {
			t.Fatalf("message %d: Nats-Msg-Id %s twice", i, m.MsgID)
		}
		ids[m.MsgID] = true
		u, err := ingest.Decode(testPrefix, m.Subject, m.Data)
		if err != nil {
			t.Fatalf("message %d (%s) rejected: %v\n%s", i, m.Subject, err, m.Data)
		}
		var market string
		var ts time.Time
		switch u.Kind {
		case ingest.KindPrice:
			market, ts = u.Price.MarketID, u.Price.TS
			if want := max(version[market], 1) + 1; u.Price.Version != want {
				t.Fatalf("%s: version %d, want %d", market, u.Price.Version, want)
			}
			version[market] = u.Price.Version
			checkQuotes(t, u.Price)
		case ingest.KindTrade:
			market, ts = u.Trade.MarketID, u.Trade.TS
		default:
			t.Fatalf("message %d: kind %s", i, u.Kind)
		}
		if ts.Before(h.From) || !ts.Before(h.To) {
			t.Fatalf("%s: ts %s outside [%s, %s)", m.Subject, ts, h.From, h.To)
		}
		if ts.Before(last[market]) {
			t.Fatalf("%s: ts %s before the market's last %s", m.Subject, ts, last[market])
		}
		last[market] = ts
		k := hourKey{market, ts.Truncate(time.Hour)}
		if u.Kind == ingest.KindPrice {
			prices[k]++
		} else {
			trades[k]++
		}
	}
	for _, id := range h.Markets {
		for hour := h.From; hour.Before(h.To); hour = hour.Add(time.Hour) {
			k := hourKey{id, hour}
			if prices[k] < candlePricesMin || trades[k] < candleTradesMin {
				t.Fatalf("%s at %s: %d prices and %d trades, want at least %d and %d",
					id, hour, prices[k], trades[k], candlePricesMin, candleTradesMin)
			}
		}
	}
}

func checkQuotes(t *testing.T, p *store.Price) {
	t.Helper()
	for v, q := range p.Quotes {
		if *q.Bid <= 0 || *q.Bid >= *q.Ask || *q.Ask >= 1 || *q.Last < *q.Bid || *q.Last > *q.Ask {
			t.Fatalf("%s v%d %s: bid %v ask %v last %v", p.MarketID, p.Version, v, *q.Bid, *q.Ask, *q.Last)
		}
	}
}

// TestCandleHistoryIsRepeatable: the same world and seed give the same
// bytes, so runs compare.
func TestCandleHistoryIsRepeatable(t *testing.T) {
	_, a := testHistory(t)
	w := NewReadsWorld(30, 5, 7)
	b, err := NewCandleHistory(w, a.Markets, a.From, a.To, testPrefix, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Msgs) != len(b.Msgs) {
		t.Fatalf("%d messages, then %d", len(a.Msgs), len(b.Msgs))
	}
	for i := range a.Msgs {
		if !bytes.Equal(a.Msgs[i].Data, b.Msgs[i].Data) || a.Msgs[i].MsgID != b.Msgs[i].MsgID {
			t.Fatalf("message %d differs:\n%s\n%s", i, a.Msgs[i].Data, b.Msgs[i].Data)
		}
	}
	if _, err := NewCandleHistory(w, []string{"mk_999999_01"}, a.From, a.To, testPrefix, 7); err == nil {
		t.Fatal("a market outside the world: no error")
	}
}

// candleAnswer renders the answer a route holding all of market's history
// would give, in the contract's shape (the fields CheckCandles reads), with
// edit applied to its candles.
func candleAnswer(t *testing.T, h *CandleHistory, market string, edit func(data []map[string]any)) []byte {
	t.Helper()
	type figures struct {
		trades int
		bid    float64
	}
	perHour := map[time.Time]*figures{}
	for hour := h.From; hour.Before(h.To); hour = hour.Add(time.Hour) {
		perHour[hour] = &figures{}
	}
	for _, m := range h.Msgs {
		u, err := ingest.Decode(testPrefix, m.Subject, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case u.Kind == ingest.KindTrade && u.Trade.MarketID == market:
			perHour[u.Trade.TS.Truncate(time.Hour)].trades++
		case u.Kind == ingest.KindPrice && u.Price.MarketID == market:
			f := perHour[u.Price.TS.Truncate(time.Hour)]
			f.bid = 0
			for _, q := range u.Price.Quotes {
				f.bid = max(f.bid, *q.Bid)
			}
		}
	}
	var data []map[string]any
	for hour := h.From; hour.Before(h.To); hour = hour.Add(time.Hour) {
		f := perHour[hour]
		data = append(data, map[string]any{"start": hour, "trades": f.trades,
			"bid": map[string]float64{"open": 0.01, "high": 0.99, "low": 0.01, "close": f.bid}})
	}
	edit(data)
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestCheckCandles: the answer the whole history makes passes; one that
// misses a trade, a price point or a candle does not.
func TestCheckCandles(t *testing.T) {
	_, h := testHistory(t)
	market := h.Markets[0]
	last := func(data []map[string]any) map[string]any { return data[len(data)-1] }
	if err := CheckCandles(candleAnswer(t, h, market, func([]map[string]any) {}), h, market); err != nil {
		t.Fatalf("the whole history: %v", err)
	}
	for _, tt := range []struct {
		name string
		edit func(data []map[string]any)
	}{
		{"a trade missing", func(data []map[string]any) { last(data)["trades"] = last(data)["trades"].(int) - 1 }},
		{"the last point missing", func(data []map[string]any) { last(data)["bid"] = data[len(data)-2]["bid"] }},
		{"no bid", func(data []map[string]any) { data[0]["bid"] = nil }},
		{"the first candle missing", func(data []map[string]any) { data[0]["start"] = h.From.Add(-time.Hour) }},
	} {
		if err := CheckCandles(candleAnswer(t, h, market, tt.edit), h, market); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	for _, body := range []string{`{"data":[]}`, `{"data":null}`, `[]`, fmt.Sprintf(`{"data":[{"start":%q,"trades":3}]}`, h.From.Format(time.RFC3339))} {
		if err := CheckCandles([]byte(body), h, market); err == nil {
			t.Errorf("%s: no error", body)
		}
	}
}

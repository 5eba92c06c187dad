package cache

import (
	"bytes"
	stdjson "encoding/json"
	"math"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// stdMarshal is what marshal replaced: encoding/json with HTML escaping
// off and the encoder's newline trimmed.
func stdMarshal(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := stdjson.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// FuzzMarshalMatchesStdlib holds the cache's encoder to encoding/json's
// bytes, and a price item rendered from the deps cache's projection of a
// market (store.PriceItemMarket) to the one rendered from its row: both
// are what every node serves and hashes into ETags. The encoder is held to
// encoding/json's bytes on every rendered type: an event read and its listing summary, a
// market item, a price item (plain and with a complement venue inverted) and
// a trade item, built from arbitrary strings (invalid UTF-8, U+2028, HTML
// characters, control bytes) and numbers (tiny, huge, negative zero). Every
// node serves these bytes and ETags are hashes of them, so a byte that
// differs would be a changed answer.
func FuzzMarshalMatchesStdlib(f *testing.F) {
	f.Add("Will it rain in Paris?", "weather", "complement", "ticker-1", 0.42, 0.58, 1234.5, 0.1, int64(7))
	f.Add("<b>&amp;</b> \u2028\u2029 \x00\x1f \"q\" \\", "a&b", "identity", "", 1e-7, 1e21, math.Copysign(0, -1), 5e-324, int64(-1))
	f.Add("\xff\xfe\xed\xa0\x80 ünï©ødé 🎲", "\t\n", "subset", "\xc3", 0.0000012345, 123456789012345678901.0, 1.7976931348623157e308, 100.0, int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, title, category, relation, venueID string, bid, ask, volume, size float64, version int64) {
		for _, x := range []float64{bid, ask, volume, size} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Skip("not a number JSON can hold (the decoder refuses it)")
			}
		}
		ts := time.Unix(1_700_000_000, int64(version&0xffffff)).UTC()
		matches := store.Matches{{Relation: relation, Confidence: size, Method: title}, nil, {Relation: store.RelationComplement, Confidence: 1, Method: category}, nil}
		e := store.Event{
			ID: "ev-" + venueID, Version: version, Title: title, Category: category, Status: store.StatusActive,
			VenueIDs: [4]*string{&venueID, nil, &title, nil}, Volume: volume, UpdatedAt: ts, Matches: matches,
		}
		resolved, result := ts.Add(-time.Hour), relation
		m := store.Market{
			ID: "m-" + title, EventID: e.ID, Version: version, Title: title, Status: store.StatusResolved,
			Venues:     map[string]string{store.Venues[0]: venueID, store.Venues[2]: category, "z" + title: relation},
			ResolvedAt: &resolved, Result: &result, UpdatedAt: ts, Matches: matches,
		}
		q := store.Quote{Bid: &bid, Ask: &ask, Last: &volume, Volume24h: size}
		p := store.Price{MarketID: m.ID, Version: version, TS: ts, Quotes: map[string]store.Quote{
			store.Venues[0]: q, store.Venues[2]: {Bid: &ask, Volume24h: volume}, title: q,
		}}
		plain := m
		plain.Matches = store.Matches{}
		values := map[string]any{
			"summary": summaryOf(&e),
			"event read": eventRead{eventSummary: summaryOf(&e),
				Markets: []marketItem{itemOf(&plain)}, RecentlyResolved: []marketItem{itemOf(&m)}},
			"market item":            itemOf(&m),
			"market item (active)":   itemOf(&store.Market{ID: title, EventID: category, Status: store.StatusActive, Title: relation}),
			"price item":             priceItemOf(store.MarketDoc{ID: m.ID, Market: &plain, Price: &p}),
			"price item (inverted)":  priceItemOf(store.MarketDoc{ID: m.ID, Market: &m, Price: &p}),
			"trade item":             tradeItemOf(&store.Trade{MarketID: m.ID, TradeID: title, Venue: venueID, Price: bid, Size: size, Side: category, TS: ts}),
			"trade item (inverted)":  tradeItem{TradeID: title, Price: ask, Inverted: true},
			"price item (no quotes)": priceItem{MarketID: title},
		}
		// The deps cache keeps markets projected (store.PriceItemMarket):
		// a price item from the projection is the one from the row.
		for _, mk := range []*store.Market{&m, &plain, {ID: m.ID, EventID: e.ID, Status: store.StatusActive, Matches: matches}} {
			r := Rules{Retention: time.Duration(version&0xffff) * time.Hour, Now: func() time.Time { return ts }}
			row := r.RenderMarket(store.MarketDoc{ID: mk.ID, Market: mk, Event: &e, Price: &p})
			proj := r.RenderMarket(store.MarketDoc{ID: mk.ID, Market: store.PriceItemMarket(mk), Event: &e, Price: &p})
			if !bytes.Equal(row.Body, proj.Body) || row.Served != proj.Served || row.Inverted != proj.Inverted {
				t.Errorf("status %s: price item from the row %q (served %v, inverted %q), from the projection %q (served %v, inverted %q)",
					mk.Status, row.Body, row.Served, row.Inverted, proj.Body, proj.Served, proj.Inverted)
			}
		}
		for name, v := range values {
			if got, want := marshal(v), stdMarshal(t, v); !bytes.Equal(got, want) {
				t.Errorf("%s:\n got %q\nwant %q (encoding/json)", name, got, want)
			}
		}
	})
}

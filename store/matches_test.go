package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketdata/marketdata/store"
)

// withMatches returns e with metadata on its two venues: identity on
// venue_a, complement on venue_b.
func withMatches(e store.Event) store.Event {
	e.Matches[0] = &store.Match{Relation: store.RelationIdentity, Confidence: 0.97, Method: "rules"}
	e.Matches[1] = &store.Match{Relation: store.RelationComplement, Confidence: 0.5, Method: "manual"}
	return e
}

// matchesText reads a row's matches column as text; "NULL" for none.
func matchesText(t *testing.T, pool *pgxpool.Pool, table, id string) string {
	t.Helper()
	var s *string
	if err := pool.QueryRow(t.Context(), `SELECT matches::text FROM `+table+` WHERE universal_id = $1`, id).Scan(&s); err != nil {
		t.Fatalf("read matches of %s %s: %v", table, id, err)
	}
	if s == nil {
		return "NULL"
	}
	return *s
}

// TestMatchesStored: match metadata is written with its event or market
// (NULL when none), follows the version rule, and comes back from every read
// that renders documents: a batch's own documents, the price path with its
// cached rows, reads by id, snapshots and the listing.
func TestMatchesStored(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ev := withMatches(newEvent("e1", 1))
	plain := newEvent("e2", 1)
	mk := newMarket("m1", "e1", 1)
	mk.Matches[2] = &store.Match{Relation: store.RelationSubset, Confidence: 0, Method: ""}
	res := apply(t, s, &store.Batch{Events: []store.Event{ev, plain}, Markets: []store.Market{mk, newMarket("m2", "e2", 1)}})

	const evText = `{"venue_a":{"relation":"identity","confidence":0.97,"method":"rules"},` +
		`"venue_b":{"relation":"complement","confidence":0.5,"method":"manual"}}`
	const mkText = `{"venue_c":{"relation":"subset","confidence":0,"method":""}}`
	for _, c := range []struct{ table, id, want string }{
		{"events", "e1", evText}, {"events", "e2", "NULL"}, {"markets", "m1", mkText}, {"markets", "m2", "NULL"},
	} {
		if got := matchesText(t, pool, c.table, c.id); got != c.want {
			t.Errorf("%s %s: matches column %s, want %s", c.table, c.id, got, c.want)
		}
	}
	wantEvent, wantMarket := show(ev.Matches), show(mk.Matches)
	none := show(store.Matches{})
	check := func(step string, got store.Matches, want string) {
		t.Helper()
		if g := show(got); g != want {
			t.Errorf("%s: matches %s, want %s", step, g, want)
		}
	}
	for _, d := range res.Events {
		if d.ID == "e1" {
			check("batch event document", d.Event.Matches, wantEvent)
			check("batch event document's market", d.Markets[0].Matches, wantMarket)
		}
	}

	// The price path reads the market row once, then uses its cached copy.
	for v := int64(1); v <= 2; v++ {
		res = apply(t, s, &store.Batch{Prices: []store.Price{newPrice("m1", v), newPrice("m2", v)}})
		check("price batch market", res.Markets[0].Market.Matches, wantMarket)
		check("price batch event", res.Markets[0].Event.Matches, wantEvent)
		check("price batch market without metadata", res.Markets[1].Market.Matches, none)
	}

	mdocs, err := s.MarketDocsByID(t.Context(), []string{"m1", "m2"})
	if err != nil {
		t.Fatal(err)
	}
	check("market read by id", mdocs[0].Market.Matches, wantMarket)
	check("market read by id, its event", mdocs[0].Event.Matches, wantEvent)
	check("market without metadata read by id", mdocs[1].Market.Matches, none)
	edocs, err := s.EventDocsByID(t.Context(), []string{"e1", "e2"})
	if err != nil {
		t.Fatal(err)
	}
	check("event read by id", edocs[0].Event.Matches, wantEvent)
	check("event without metadata read by id", edocs[1].Event.Matches, none)
	listed, err := s.ListedEvents(t.Context(), store.ListFilter{}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 {
		t.Fatalf("listed %d events, want 2", len(listed))
	}
	check("listed event", listed[0].Matches, wantEvent)
	check("listed event without metadata", listed[1].Matches, none)

	snap := openSnapshot(t, s)
	if err := snap.EventDocs(t.Context(), 10, func(d store.EventDoc) error {
		if d.ID == "e1" {
			check("snapshot event", d.Event.Matches, wantEvent)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := snap.MarketDocs(t.Context(), func(d store.MarketDoc) error {
		if d.ID == "m1" {
			check("snapshot market", d.Market.Matches, wantMarket)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A version not above the stored one changes nothing, metadata included.
	stale := newEvent("e1", 1)
	staleMk := newMarket("m1", "e1", 1)
	staleMk.Matches[0] = &store.Match{Relation: store.RelationOverlap, Confidence: 1, Method: "model"}
	res = apply(t, s, &store.Batch{Events: []store.Event{stale}, Markets: []store.Market{staleMk}})
	if res.Applied["event:e1"] || res.Applied["market:m1"] {
		t.Errorf("stale updates applied: %v", appliedKeys(res.Applied))
	}
	if got := matchesText(t, pool, "events", "e1"); got != evText {
		t.Errorf("after a stale event: matches %s, want %s", got, evText)
	}
	if got := matchesText(t, pool, "markets", "m1"); got != mkText {
		t.Errorf("after a stale market: matches %s, want %s", got, mkText)
	}

	// A newer version replaces the metadata; one without any clears it.
	newer := newMarket("m1", "e1", 2)
	newer.Matches[0] = staleMk.Matches[0]
	apply(t, s, &store.Batch{Events: []store.Event{newEvent("e1", 2)}, Markets: []store.Market{newer}})
	if got := matchesText(t, pool, "events", "e1"); got != "NULL" {
		t.Errorf("after a newer event without metadata: matches %s, want NULL", got)
	}
	if got, want := matchesText(t, pool, "markets", "m1"), `{"venue_a":{"relation":"overlap","confidence":1,"method":"model"}}`; got != want {
		t.Errorf("after a newer market: matches %s, want %s", got, want)
	}
	res = apply(t, s, &store.Batch{Prices: []store.Price{newPrice("m1", 3)}})
	// A price's document carries each venue's relation (store.PriceItemMarket).
	check("price batch after the market changed", res.Markets[0].Market.Matches, show(store.PriceItemMarket(&newer).Matches))
	check("price batch after the event changed", res.Markets[0].Event.Matches, none)
}

// TestMatchesColumnRefused: a matches column that does not hold an object of
// venues (written by hand) fails the read rather than losing metadata.
func TestMatchesColumnRefused(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	apply(t, s, &store.Batch{Events: []store.Event{newEvent("e1", 1)}})
	for _, bad := range []string{`{"venue_x":{"relation":"identity","confidence":1,"method":"m"}}`, `[1,2]`} {
		if _, err := pool.Exec(t.Context(), `UPDATE events SET matches = $1::json WHERE universal_id = 'e1'`, bad); err != nil {
			t.Fatal(err)
		}
		if _, err := s.EventDocsByID(t.Context(), []string{"e1"}); err == nil {
			t.Errorf("matches %s: read succeeded, want an error", bad)
		}
	}
}

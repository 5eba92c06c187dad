package store_test

import (
	"testing"

	"github.com/marketdata/marketdata/store"
)

// Two stores on one database stand for two ingest processes, each with its
// own cache of market and event rows. Whatever one of them changes — a
// market's row, its move to another event, that event's row — the other's
// next price batch renders with the rows as they are now, never its cached
// copy, and its answer equals a fresh read of the document.
func TestPriceBatchCachedRowsAcrossProcesses(t *testing.T) {
	t.Parallel()
	a, pool := setup(t)
	b := store.New(pool)
	apply(t, a, &store.Batch{
		Events:  []store.Event{newEvent("e1", 1), newEvent("e2", 1)},
		Markets: []store.Market{newMarket("m", "e1", 1)},
	})
	price := int64(0)
	check := func(step string, want store.Market, wantEvent store.Event) {
		t.Helper()
		price++
		res := apply(t, a, &store.Batch{Prices: []store.Price{newPrice("m", price)}})
		if len(res.Markets) != 1 {
			t.Fatalf("%s: %d market documents, want 1", step, len(res.Markets))
		}
		d := res.Markets[0]
		if got, want := show(d.Market), show(store.PriceItemMarket(&want)); got != want {
			t.Errorf("%s: market\n got %s\nwant %s", step, got, want)
		}
		if got, want := show(d.Event), show(wantEvent); got != want {
			t.Errorf("%s: event\n got %s\nwant %s", step, got, want)
		}
		fresh, err := b.MarketDocsByID(t.Context(), []string{"m"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := show(d), show(priceView(fresh[0])); got != want {
			t.Errorf("%s: document\n got %s\nwant a fresh read's %s", step, got, want)
		}
		if !res.Applied["price:m"] {
			t.Errorf("%s: price version %d not applied", step, price)
		}
	}
	check("first price", newMarket("m", "e1", 1), newEvent("e1", 1))
	check("cached rows", newMarket("m", "e1", 1), newEvent("e1", 1))

	apply(t, b, &store.Batch{Markets: []store.Market{newMarket("m", "e1", 2)}})
	check("market changed by the other process", newMarket("m", "e1", 2), newEvent("e1", 1))

	apply(t, b, &store.Batch{Markets: []store.Market{newMarket("m", "e2", 3)}})
	check("market moved by the other process", newMarket("m", "e2", 3), newEvent("e2", 1))

	apply(t, b, &store.Batch{Events: []store.Event{newEvent("e2", 5)}})
	check("event changed by the other process", newMarket("m", "e2", 3), newEvent("e2", 5))

	// A price the other process wrote meanwhile is read back, not assumed.
	apply(t, b, &store.Batch{Prices: []store.Price{newPrice("m", 100)}})
	res := apply(t, a, &store.Batch{Prices: []store.Price{newPrice("m", 50)}})
	if res.Applied["price:m"] {
		t.Error("an older price was applied")
	}
	if got, want := show(res.Markets[0].Price), show(newPrice("m", 100)); got != want {
		t.Errorf("price after an older update:\n got %s\nwant %s", got, want)
	}
}

// A process that writes a market keeps the rows it wrote: the market's first
// price after that reads neither the market's row nor its event's (a new
// market's first prices are most of a fresh world's). Shown by a change made
// behind the deps stamp, which no process makes: the cached row is what the
// price's document carries until the stamp moves.
func TestMarketWriteFillsDepsCache(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	apply(t, s, &store.Batch{
		Events:  []store.Event{newEvent("e1", 1)},
		Markets: []store.Market{newMarket("m", "e1", 1)},
	})
	if _, err := pool.Exec(t.Context(), `UPDATE markets SET version = 99 WHERE universal_id = 'm'`); err != nil {
		t.Fatal(err)
	}
	res := apply(t, s, &store.Batch{Prices: []store.Price{newPrice("m", 1)}})
	if got := res.Markets[0].Market.Version; got != 1 {
		t.Errorf("first price after the market's write: market version %d, want the written 1 (read from Postgres, not the cache)", got)
	}
	// The stamp moved (as any change of the row moves it): the row is read.
	if _, err := pool.Exec(t.Context(), `UPDATE doc_revs SET deps = nextval('doc_rev_seq') WHERE doc = 'm:m'`); err != nil {
		t.Fatal(err)
	}
	res = apply(t, s, &store.Batch{Prices: []store.Price{newPrice("m", 2)}})
	if got := res.Markets[0].Market.Version; got != 99 {
		t.Errorf("after the stamp moved: market version %d, want the row's 99", got)
	}
}

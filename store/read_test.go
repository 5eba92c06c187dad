package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// Ids whose bytewise order ("B-1" < "a-1" < "a-3" < "a_2") differs from a
// linguistic one.
func snapshotData(t *testing.T, s *store.Store) (events map[string]store.EventDoc, markets map[string]store.MarketDoc) {
	t.Helper()
	resolved := newMarket("m_2", "B-1", 1)
	resolved.Status, resolved.ResolvedAt, resolved.Result = store.StatusResolved, ptr(t0), ptr("no")
	batches := []store.Batch{
		{Events: []store.Event{newEvent("a_2", 1), newEvent("B-1", 1)}},
		{Markets: []store.Market{newMarket("m-1", "a-1", 1), newMarket("M-1", "a-1", 1), resolved}},
		{Markets: []store.Market{newMarket("m-3", "a-3", 1)}}, // a-3 never arrives
		{Prices: []store.Price{newPrice("m-1", 1), newPrice("zz-orphan", 1)}},
		{Events: []store.Event{newEvent("a-1", 1)}},
		{Prices: []store.Price{newPrice("m-1", 2)}},
	}
	events, markets = map[string]store.EventDoc{}, map[string]store.MarketDoc{}
	for _, b := range batches {
		res := apply(t, s, &b)
		for _, d := range res.Events {
			if d.Rev > events[d.ID].Rev {
				events[d.ID] = d
			}
		}
		for _, d := range res.Markets {
			if d.Rev > markets[d.ID].Rev {
				markets[d.ID] = d
			}
		}
	}
	return events, markets
}

func TestSnapshotDocs(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	lastEvents, lastMarkets := snapshotData(t, s)
	snap := openSnapshot(t, s)
	// Every read through the snapshot sees the state of its first read: later
	// writes are not seen.
	if err := snap.MarketDocs(t.Context(), func(store.MarketDoc) error { return nil }); err != nil {
		t.Fatalf("MarketDocs: %v", err)
	}
	apply(t, s, &store.Batch{Events: []store.Event{newEvent("late", 1)}, Prices: []store.Price{newPrice("late-m", 1)}})

	for _, pageSize := range []int{1, 2, 3, 100} {
		t.Run(fmt.Sprintf("EventDocs page %d", pageSize), func(t *testing.T) {
			var got []store.EventDoc
			if err := snap.EventDocs(t.Context(), pageSize, func(d store.EventDoc) error {
				got = append(got, d)
				return nil
			}); err != nil {
				t.Fatalf("EventDocs: %v", err)
			}
			var want []store.EventDoc
			for _, id := range []string{"B-1", "a-1", "a-3", "a_2"} {
				want = append(want, lastEvents[id])
			}
			if show(got) != show(want) {
				t.Errorf("EventDocs:\n got %s\nwant %s", show(got), show(want))
			}
		})
	}

	t.Run("MarketDocs", func(t *testing.T) {
		var got []store.MarketDoc
		if err := snap.MarketDocs(t.Context(), func(d store.MarketDoc) error {
			got = append(got, d)
			return nil
		}); err != nil {
			t.Fatalf("MarketDocs: %v", err)
		}
		var want []store.MarketDoc
		for _, id := range []string{"M-1", "m-1", "m-3", "m_2", "zz-orphan"} {
			want = append(want, priceView(lastMarkets[id]))
		}
		for i := range got {
			got[i] = priceView(got[i])
		}
		if show(got) != show(want) {
			t.Errorf("MarketDocs:\n got %s\nwant %s", show(got), show(want))
		}
		// The price of an unknown market is a document too.
		p := newPrice("zz-orphan", 1)
		if orphan := want[len(want)-1]; orphan.Market != nil || orphan.Event != nil || show(orphan.Price) != show(&p) {
			t.Errorf("orphan price document: got %s, want Market and Event nil, Price %s", show(orphan), show(&p))
		}
	})

	t.Run("callback error stops the walk", func(t *testing.T) {
		stop := errors.New("stop")
		calls := 0
		fn := func() error { calls++; return stop }
		if err := snap.EventDocs(t.Context(), 2, func(store.EventDoc) error { return fn() }); !errors.Is(err, stop) {
			t.Errorf("EventDocs: got %v, want the callback's error", err)
		}
		if err := snap.MarketDocs(t.Context(), func(store.MarketDoc) error { return fn() }); !errors.Is(err, stop) {
			t.Errorf("MarketDocs: got %v, want the callback's error", err)
		}
		if calls != 2 {
			t.Errorf("callback calls: got %d, want 2", calls)
		}
	})
}

func TestSnapshotTrades(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second).In(cet) }
	trades := []store.Trade{
		newTrade("m-1", "t-a", at(3)),
		newTrade("m-1", "t-b", at(5)),
		newTrade("m-1", "t-c", at(5)), // ties on ts: trade_id desc, bytewise
		newTrade("m-1", "T-d", at(5)),
		newTrade("m-1", "t-e", at(1)),
		newTrade("M-1", "x1", at(0)),
		newTrade("M-1", "x2", at(1)),
	}
	apply(t, s, &store.Batch{Trades: trades[:4]})
	apply(t, s, &store.Batch{Trades: trades[3:]})
	byID := map[string]store.Trade{}
	for _, tr := range trades {
		tr.TS = tr.TS.UTC()
		byID[tr.TradeID] = tr
	}
	pick := func(ids ...string) []store.Trade {
		var out []store.Trade
		for _, id := range ids {
			out = append(out, byID[id])
		}
		return out
	}

	snap := openSnapshot(t, s)
	for _, tc := range []struct {
		limit int
		want  map[string][]store.Trade
	}{
		{1, map[string][]store.Trade{"M-1": pick("x2"), "m-1": pick("t-c")}},
		{3, map[string][]store.Trade{"M-1": pick("x2", "x1"), "m-1": pick("t-c", "t-b", "T-d")}},
		{200, map[string][]store.Trade{"M-1": pick("x2", "x1"), "m-1": pick("t-c", "t-b", "T-d", "t-a", "t-e")}},
	} {
		t.Run(fmt.Sprintf("limit %d", tc.limit), func(t *testing.T) {
			var order []string
			got := map[string][]store.Trade{}
			if err := snap.Trades(t.Context(), tc.limit, func(marketID string, trades []store.Trade) error {
				order = append(order, marketID)
				got[marketID] = trades
				return nil
			}); err != nil {
				t.Fatalf("Trades: %v", err)
			}
			if want := []string{"M-1", "m-1"}; !slices.Equal(order, want) {
				t.Errorf("markets in order %v, want %v", order, want)
			}
			if show(got) != show(tc.want) {
				t.Errorf("Trades:\n got %s\nwant %s", show(got), show(tc.want))
			}
		})
	}
}

func TestEventsResolvedBetween(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	resolvedMarket := func(id, event string, at time.Time) store.Market {
		m := newMarket(id, event, 1)
		m.Status, m.ResolvedAt, m.Result = store.StatusResolved, &at, ptr("yes")
		return m
	}
	h := time.Hour
	apply(t, s, &store.Batch{Markets: []store.Market{
		resolvedMarket("rm1", "r1", t0.Add(-h)),
		resolvedMarket("rm2", "r2", t0),
		resolvedMarket("rm2b", "r2", t0.Add(-h/2)), // a second market of r2: r2 listed once
		resolvedMarket("rm3", "r3", t0.Add(h)),
		newMarket("rm4", "r4", 1), // active
	}})
	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     []string
	}{
		{"from is excluded, to included", t0.Add(-h), t0, []string{"r2"}},
		{"just before from", t0.Add(-h - time.Microsecond), t0, []string{"r1", "r2"}},
		{"just before to", t0.Add(-h), t0.Add(-time.Microsecond), []string{"r2"}},
		{"later", t0, t0.Add(h), []string{"r3"}},
		{"all", t0.Add(-2 * h), t0.Add(2 * h), []string{"r1", "r2", "r3"}},
		{"none", t0.Add(h), t0.Add(2 * h), nil},
		{"other zone", t0.Add(-h).In(cet), t0.In(cet), []string{"r2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.EventsResolvedBetween(t.Context(), tc.from, tc.to)
			if err != nil {
				t.Fatalf("EventsResolvedBetween: %v", err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("EventsResolvedBetween(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
			}
		})
	}
}

package store_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/store"
)

// revTracker checks that every document's revision strictly increases from
// one batch to the next.
type revTracker map[string]int64

func (r revTracker) check(t *testing.T, res *store.Result) {
	t.Helper()
	see := func(doc string, rev int64) {
		if prev, ok := r[doc]; ok && rev <= prev {
			t.Errorf("document %s: Rev %d after %d, want strictly increasing", doc, rev, prev)
		}
		r[doc] = rev
	}
	for _, d := range res.Events {
		see("e:"+d.ID, d.Rev)
	}
	for _, d := range res.Markets {
		see("m:"+d.ID, d.Rev)
	}
}

// eventDocs and marketDocs render documents in id order with Rev cleared
// (market documents as the price path carries them, priceView).
func eventDocs(docs []store.EventDoc) string {
	docs = slices.Clone(docs)
	slices.SortFunc(docs, func(a, b store.EventDoc) int { return strings.Compare(a.ID, b.ID) })
	for i := range docs {
		docs[i].Rev = 0
	}
	return show(docs)
}

func marketDocs(docs []store.MarketDoc) string {
	docs = slices.Clone(docs)
	slices.SortFunc(docs, func(a, b store.MarketDoc) int { return strings.Compare(a.ID, b.ID) })
	for i := range docs {
		docs[i] = priceView(docs[i]) // a batch of prices carries the projection
		docs[i].Rev = 0
	}
	return show(docs)
}

func TestResultDocuments(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	e1 := newEvent("e1", 1)
	e1v2 := newEvent("e1", 2)
	m1 := newMarket("m1", "e1", 1)
	m2 := newMarket("m2", "e1", 1)
	p1 := newPrice("m1", 1)
	px := newPrice("mx", 1)

	steps := []struct {
		name        string
		batch       store.Batch
		wantEvents  []store.EventDoc
		wantMarkets []store.MarketDoc
	}{
		{
			name:        "market of an unknown event",
			batch:       store.Batch{Markets: []store.Market{m1}},
			wantEvents:  []store.EventDoc{{ID: "e1", Event: nil, Markets: []store.Market{m1}}},
			wantMarkets: []store.MarketDoc{{ID: "m1", Market: &m1}},
		},
		{
			name:        "second market",
			batch:       store.Batch{Markets: []store.Market{m2}},
			wantEvents:  []store.EventDoc{{ID: "e1", Markets: []store.Market{m1, m2}}},
			wantMarkets: []store.MarketDoc{{ID: "m2", Market: &m2}},
		},
		{
			name:       "the event arrives: documents of all its markets",
			batch:      store.Batch{Events: []store.Event{e1}},
			wantEvents: []store.EventDoc{{ID: "e1", Event: &e1, Markets: []store.Market{m1, m2}}},
			wantMarkets: []store.MarketDoc{
				{ID: "m1", Market: &m1, Event: &e1},
				{ID: "m2", Market: &m2, Event: &e1},
			},
		},
		{
			name:        "price of a known market",
			batch:       store.Batch{Prices: []store.Price{p1}},
			wantMarkets: []store.MarketDoc{{ID: "m1", Market: &m1, Event: &e1, Price: &p1}},
		},
		{
			name:        "price of an unknown market",
			batch:       store.Batch{Prices: []store.Price{px}},
			wantMarkets: []store.MarketDoc{{ID: "mx", Price: &px}},
		},
		{
			name:       "event update",
			batch:      store.Batch{Events: []store.Event{e1v2}},
			wantEvents: []store.EventDoc{{ID: "e1", Event: &e1v2, Markets: []store.Market{m1, m2}}},
			wantMarkets: []store.MarketDoc{
				{ID: "m1", Market: &m1, Event: &e1v2, Price: &p1},
				{ID: "m2", Market: &m2, Event: &e1v2},
			},
		},
		{
			// A stale update writes nothing but still answers the current state.
			name:        "stale market update",
			batch:       store.Batch{Markets: []store.Market{newMarket("m1", "e1", 1)}},
			wantEvents:  []store.EventDoc{{ID: "e1", Event: &e1v2, Markets: []store.Market{m1, m2}}},
			wantMarkets: []store.MarketDoc{{ID: "m1", Market: &m1, Event: &e1v2, Price: &p1}},
		},
		{
			name:       "touch",
			batch:      store.Batch{Touch: []string{"e1", "e1"}},
			wantEvents: []store.EventDoc{{ID: "e1", Event: &e1v2, Markets: []store.Market{m1, m2}}},
			wantMarkets: []store.MarketDoc{
				{ID: "m1", Market: &m1, Event: &e1v2, Price: &p1},
				{ID: "m2", Market: &m2, Event: &e1v2},
			},
		},
	}
	revs := revTracker{}
	for _, step := range steps {
		res := apply(t, s, &step.batch)
		if got, want := eventDocs(res.Events), eventDocs(step.wantEvents); got != want {
			t.Errorf("%s: Result.Events:\n got %s\nwant %s", step.name, got, want)
		}
		if got, want := marketDocs(res.Markets), marketDocs(step.wantMarkets); got != want {
			t.Errorf("%s: Result.Markets:\n got %s\nwant %s", step.name, got, want)
		}
		revs.check(t, res)
	}
}

// A market moving to another event changes both events' documents; it is
// listed only under its new event.
func TestResultMarketMovesEvent(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	a, b := newEvent("A", 1), newEvent("B", 1)
	m1, m2, m3 := newMarket("m1", "A", 1), newMarket("m2", "A", 1), newMarket("m3", "B", 1)
	revs := revTracker{}
	revs.check(t, apply(t, s, &store.Batch{Events: []store.Event{a, b}, Markets: []store.Market{m1, m2, m3}}))

	moved := newMarket("m1", "B", 2)
	res := apply(t, s, &store.Batch{Markets: []store.Market{moved}})
	revs.check(t, res)
	wantEvents := []store.EventDoc{
		{ID: "A", Event: &a, Markets: []store.Market{m2}},
		{ID: "B", Event: &b, Markets: []store.Market{moved, m3}},
	}
	if got, want := eventDocs(res.Events), eventDocs(wantEvents); got != want {
		t.Errorf("Result.Events:\n got %s\nwant %s", got, want)
	}
	if got, want := marketDocs(res.Markets), marketDocs([]store.MarketDoc{{ID: "m1", Market: &moved, Event: &b}}); got != want {
		t.Errorf("Result.Markets:\n got %s\nwant %s", got, want)
	}

	// Moving back, in a batch that also updates the old event.
	back := newMarket("m1", "A", 3)
	b2 := newEvent("B", 2)
	res = apply(t, s, &store.Batch{Events: []store.Event{b2}, Markets: []store.Market{back}})
	revs.check(t, res)
	wantEvents = []store.EventDoc{
		{ID: "A", Event: &a, Markets: []store.Market{back, m2}},
		{ID: "B", Event: &b2, Markets: []store.Market{m3}},
	}
	if got, want := eventDocs(res.Events), eventDocs(wantEvents); got != want {
		t.Errorf("after moving back, Result.Events:\n got %s\nwant %s", got, want)
	}
	wantMarkets := []store.MarketDoc{{ID: "m1", Market: &back, Event: &a}, {ID: "m3", Market: &m3, Event: &b2}}
	if got, want := marketDocs(res.Markets), marketDocs(wantMarkets); got != want {
		t.Errorf("after moving back, Result.Markets:\n got %s\nwant %s", got, want)
	}
}

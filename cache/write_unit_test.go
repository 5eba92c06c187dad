package cache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// The write scripts (putDoc, putListing) and the trade list writes, driven
// through Apply on miniredis and checked on the raw keys of the layout.

// TestPutDocFields: each document hash holds exactly the fields its state
// calls for, and a rewrite drops the fields the new state lacks.
func TestPutDocFields(t *testing.T) {
	c, rdb, _ := miniCache(t)
	r := testRules()
	two := map[string]string{"a": "A", "b": "B"}
	ev := activeEvent("ev-1", "politics", two)
	m1, m2 := activeMarket("m-1", "ev-1"), activeMarket("m-2", "ev-1")
	price := &store.Price{MarketID: "m-1", Version: 2, TS: testNow, Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.3), ptr(0.4), nil, 5)}}
	evDoc := store.EventDoc{ID: "ev-1", Rev: 5, Event: ev, Markets: []store.Market{m1, m2}}
	m1Doc := store.MarketDoc{ID: "m-1", Rev: 6, Market: &m1, Event: ev, Price: price}
	merged := activeEvent("ev-2", "politics", two)
	merged.Status, merged.MergedInto = store.StatusMerged, ptr("ev-1")
	apply(t, c, &store.Result{
		Events: []store.EventDoc{evDoc, {ID: "ev-2", Rev: 7, Event: merged}, {ID: "ev-3", Rev: 8}},
		Markets: []store.MarketDoc{m1Doc,
			{ID: "m-2", Rev: 9, Market: &m2, Event: ev},
			{ID: "m-3", Rev: 10, Price: price}},
	})
	checkHash(t, rdb, "md:{e:ev-1}", map[string]string{"g": "5", "b": string(r.RenderEvent(evDoc).Body)})
	checkHash(t, rdb, "md:{e:ev-2}", map[string]string{"g": "7", "m": "ev-1"})
	checkHash(t, rdb, "md:{e:ev-3}", map[string]string{"g": "8"})
	checkHash(t, rdb, "md:{m:m-1}", map[string]string{"g": "6", "s": "1", "b": string(r.RenderMarket(m1Doc).Body)})
	checkHash(t, rdb, "md:{m:m-2}", map[string]string{"g": "9", "s": "1"})
	checkHash(t, rdb, "md:{m:m-3}", map[string]string{"g": "10"})

	// ev-1 is merged away and m-1 leaves the served set: their bodies go.
	gone := *ev
	gone.Status, gone.MergedInto = store.StatusMerged, ptr("ev-9")
	apply(t, c, &store.Result{
		Events:  []store.EventDoc{{ID: "ev-1", Rev: 11, Event: &gone}},
		Markets: []store.MarketDoc{{ID: "m-1", Rev: 12, Market: &m1, Price: price}},
	})
	checkHash(t, rdb, "md:{e:ev-1}", map[string]string{"g": "11", "m": "ev-9"})
	checkHash(t, rdb, "md:{m:m-1}", map[string]string{"g": "12"})
}

// TestPutDocRevisionGuard: a write that arrives late with an older or equal
// revision never replaces a newer one, for the event document, the price
// item and the listing entry; a newer one replaces them all. Two revisions
// of one document in one batch end on the newer, whatever their order.
func TestPutDocRevisionGuard(t *testing.T) {
	c, rdb, _ := miniCache(t)
	r := testRules()
	two := map[string]string{"a": "A", "b": "B"}
	evOld, evNew := activeEvent("ev", "politics", two), activeEvent("ev", "sports", two)
	evOld.Title, evNew.Title = "old", "new"
	evOld.Volume, evNew.Volume = 1, 99
	mOld, mNew := activeMarket("m", "ev"), activeMarket("m", "ev")
	mOld.Title, mNew.Title = "old", "new"
	pOld := &store.Price{MarketID: "m", Version: 1, TS: testNow, Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.1), nil, nil, 0)}}
	pNew := &store.Price{MarketID: "m", Version: 2, TS: testNow, Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.2), nil, nil, 0)}}
	newEv := store.EventDoc{ID: "ev", Rev: 10, Event: evNew, Markets: []store.Market{mNew}}
	newM := store.MarketDoc{ID: "m", Rev: 10, Market: &mNew, Event: evNew, Price: pNew}
	apply(t, c, &store.Result{Events: []store.EventDoc{newEv}, Markets: []store.MarketDoc{newM}})
	wantEv := map[string]string{"g": "10", "b": string(r.RenderEvent(newEv).Body)}
	wantM := map[string]string{"g": "10", "s": "1", "b": string(r.RenderMarket(newM).Body)}
	wantListing := listingOf(t, rdb, "ev")
	if wantListing.summary != string(r.RenderEvent(newEv).Summary) || wantListing.rev != "10" {
		t.Fatalf("listing after rev 10: got %+v", wantListing)
	}

	resolved := *evOld
	resolved.Status = store.StatusResolved
	late := map[string]*store.Event{
		"older, other content":  evOld,
		"older, would unlist":   &resolved,
		"older, would unserve":  activeEvent("ev", "politics", map[string]string{"a": "A"}),
		"older, would merge":    {ID: "ev", Status: store.StatusMerged, MergedInto: ptr("x"), VenueIDs: venues(two)},
		"older, deleted in row": nil,
	}
	for _, rev := range []int64{9, 10} {
		for name, e := range late {
			t.Run(fmt.Sprintf("rev %d %s", rev, name), func(t *testing.T) {
				apply(t, c, &store.Result{
					Events:  []store.EventDoc{{ID: "ev", Rev: rev, Event: e, Markets: []store.Market{mOld}}},
					Markets: []store.MarketDoc{{ID: "m", Rev: rev, Market: &mOld, Event: evOld, Price: pOld}},
				})
				checkHash(t, rdb, "md:{e:ev}", wantEv)
				checkHash(t, rdb, "md:{m:m}", wantM)
				if got := listingOf(t, rdb, "ev"); fmt.Sprint(got) != fmt.Sprint(wantListing) {
					t.Errorf("listing entry:\n got %+v\nwant %+v", got, wantListing)
				}
			})
		}
	}

	t.Run("newer replaces", func(t *testing.T) {
		// A newer unserved market document drops the served flag and body;
		// a newer event in another category moves its listing entry.
		apply(t, c, &store.Result{
			Events:  []store.EventDoc{{ID: "ev", Rev: 11, Event: evOld, Markets: []store.Market{mOld}}},
			Markets: []store.MarketDoc{{ID: "m", Rev: 11, Price: pOld}},
		})
		checkHash(t, rdb, "md:{m:m}", map[string]string{"g": "11"})
		doc := r.RenderEvent(store.EventDoc{ID: "ev", Rev: 11, Event: evOld, Markets: []store.Market{mOld}})
		checkHash(t, rdb, "md:{e:ev}", map[string]string{"g": "11", "b": string(doc.Body)})
		if got := listingOf(t, rdb, "ev"); got.rev != "11" || got.summary != string(doc.Summary) || !slices.Equal(got.sets, sorted(doc.Sets)) {
			t.Errorf("listing entry after rev 11: got %+v, want the politics entry", got)
		}
	})

	t.Run("one batch, newer first", func(t *testing.T) {
		newer := store.MarketDoc{ID: "m", Rev: 21, Market: &mNew, Event: evNew, Price: pNew}
		older := store.MarketDoc{ID: "m", Rev: 20, Market: &mOld, Event: evOld, Price: pOld}
		apply(t, c, &store.Result{Markets: []store.MarketDoc{newer, older}})
		checkHash(t, rdb, "md:{m:m}", map[string]string{"g": "21", "s": "1", "b": string(r.RenderMarket(newer).Body)})
	})
}

// listing is an event's listing entry, read from every key that holds it.
type listing struct {
	rev, summary, setsField string
	sets                    []string // the sets that hold the id, sorted
	negVolume               float64
	ranked                  bool
}

func listingOf(t *testing.T, rdb *redis.Client, id string) listing {
	t.Helper()
	ctx := context.Background()
	var l listing
	l.rev, _ = rdb.HGet(ctx, "md:{i}:g", id).Result()
	l.summary, _ = rdb.HGet(ctx, "md:{i}:s", id).Result()
	l.setsField, _ = rdb.HGet(ctx, "md:{i}:k", id).Result()
	l.sets = setsContaining(t, rdb, "md:", id)
	score, err := rdb.ZScore(ctx, "md:{i}:v", id).Result()
	l.negVolume, l.ranked = score, err == nil
	return l
}

// cross lists the set names of every combination of the filters.
func cross(cats, venues, mins []string) []string {
	var out []string
	for _, c := range cats {
		for _, v := range venues {
			for _, m := range mins {
				out = append(out, c+":"+v+":"+m)
			}
		}
	}
	return sorted(out)
}

// TestPutListingSets: a listed event is in exactly the sets of its
// category, venues and venue count ("*" = any; min_venues 1 and 2 are the
// set "1", 3 and 4 add sets "3" and "4"), its {i}:k field names them, and a
// change moves it out of the sets it left.
func TestPutListingSets(t *testing.T) {
	c, rdb, _ := miniCache(t)
	r := testRules()
	tests := []struct {
		name string
		e    *store.Event
		want []string
	}{
		{"two venues", activeEvent("ev", "politics", map[string]string{"a": "A", "b": "B"}),
			cross([]string{"*", "politics"}, []string{"*", "venue_a", "venue_b"}, []string{"1"})},
		{"three venues, other category", activeEvent("ev", "sports", map[string]string{"b": "B", "c": "C", "d": "D"}),
			cross([]string{"*", "sports"}, []string{"*", "venue_b", "venue_c", "venue_d"}, []string{"1", "3"})},
		{"four venues", activeEvent("ev", "sports", map[string]string{"a": "A", "b": "B", "c": "C", "d": "D"}),
			cross([]string{"*", "sports"}, []string{"*", "venue_a", "venue_b", "venue_c", "venue_d"}, []string{"1", "3", "4"})},
		{"back to two", activeEvent("ev", "crypto", map[string]string{"c": "C", "d": "D"}),
			cross([]string{"*", "crypto"}, []string{"*", "venue_c", "venue_d"}, []string{"1"})},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev := int64(i + 1)
			tt.e.Volume = float64(10 * (i + 1))
			applyEvent(t, c, rev, tt.e)
			got := listingOf(t, rdb, "ev")
			if !slices.Equal(got.sets, tt.want) {
				t.Errorf("sets holding ev:\n got %q\nwant %q", got.sets, tt.want)
			}
			if fields := sorted(strings.Fields(got.setsField)); !slices.Equal(fields, tt.want) {
				t.Errorf("{i}:k names %q, want %q", fields, tt.want)
			}
			doc := r.RenderEvent(store.EventDoc{ID: "ev", Rev: rev, Event: tt.e})
			if got.rev != fmt.Sprint(rev) || got.summary != string(doc.Summary) || !got.ranked || got.negVolume != -tt.e.Volume {
				t.Errorf("entry: got %+v, want rev %d, the summary and score %v", got, rev, -tt.e.Volume)
			}
		})
	}
	// Every set that ever held ev and no longer does is empty (ZREM of the
	// last member deletes the key): only the current sets remain.
	keys, err := rdb.Keys(context.Background(), "md:{i}:f:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(keys), len(tests[len(tests)-1].want); got != want {
		t.Errorf("%d set keys remain, want %d (the current event's): %q", got, want, sorted(keys))
	}
}

// TestPutListingUnlists: an event that resolves, is merged, or drops below
// two venues leaves every listing key, while its revision stays in {i}:g so
// that a late older write cannot list it again; a newer active state lists
// it again.
func TestPutListingUnlists(t *testing.T) {
	two := map[string]string{"a": "A", "b": "B"}
	active := activeEvent("ev", "politics", two)
	resolved := *active
	resolved.Status = store.StatusResolved
	merged := *active
	merged.Status, merged.MergedInto = store.StatusMerged, ptr("other")
	oneVenue := activeEvent("ev", "politics", map[string]string{"a": "A"})
	r := testRules()
	tests := []struct {
		name   string
		e      *store.Event
		wantEv func(body []byte) map[string]string
	}{
		{"resolved", &resolved, func(body []byte) map[string]string { return map[string]string{"g": "2", "b": string(body)} }},
		{"merged", &merged, func([]byte) map[string]string { return map[string]string{"g": "2", "m": "other"} }},
		{"one venue", oneVenue, func([]byte) map[string]string { return map[string]string{"g": "2"} }},
		{"row gone", nil, func([]byte) map[string]string { return map[string]string{"g": "2"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rdb, _ := miniCache(t)
			applyEvent(t, c, 1, active)
			if l := listingOf(t, rdb, "ev"); len(l.sets) == 0 || l.summary == "" {
				t.Fatalf("active event not listed: %+v", l)
			}
			apply(t, c, &store.Result{Events: []store.EventDoc{{ID: "ev", Rev: 2, Event: tt.e}}})
			doc := r.RenderEvent(store.EventDoc{ID: "ev", Rev: 2, Event: tt.e})
			checkHash(t, rdb, "md:{e:ev}", tt.wantEv(doc.Body))
			if got, want := listingOf(t, rdb, "ev"), (listing{rev: "2"}); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("listing entry: got %+v, want only the revision %+v", got, want)
			}
			applyEvent(t, c, 1, active) // late: must not list it again
			if got := listingOf(t, rdb, "ev"); got.summary != "" || len(got.sets) != 0 || got.ranked {
				t.Errorf("a late older write listed it again: %+v", got)
			}
			applyEvent(t, c, 3, active)
			if got := listingOf(t, rdb, "ev"); got.rev != "3" || got.summary == "" || len(got.sets) != 6 || !got.ranked {
				t.Errorf("a newer active state did not list it again: %+v", got)
			}
		})
	}
}

// TestVolumeRanking: {i}:v ranks listed events by volume, descending, ties
// by ascending id, which ZRANGE gives from the score -volume.
func TestVolumeRanking(t *testing.T) {
	c, rdb, _ := miniCache(t)
	var res store.Result
	for i, ev := range []struct {
		id  string
		vol float64
	}{{"ev-b", 5}, {"ev-a", 20}, {"ev-c", 5}, {"ev-d", 0.5}, {"ev-e", 1e9}} {
		e := activeEvent(ev.id, "politics", map[string]string{"a": "A", "b": "B"})
		e.Volume = ev.vol
		res.Events = append(res.Events, store.EventDoc{ID: ev.id, Rev: int64(i + 1), Event: e})
	}
	apply(t, c, &res)
	got, err := rdb.ZRange(context.Background(), "md:{i}:v", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ev-e", "ev-a", "ev-b", "ev-c", "ev-d"}; !slices.Equal(got, want) {
		t.Errorf("ranking: got %q, want %q", got, want)
	}
}

// TestTradeListTrim: a market's trade list keeps its newest MaxTrades
// trades, newest first (ties in a microsecond by trade id, descending),
// whatever order and batches they came in; a replay, or an old trade that
// arrives after newer ones filled the list, changes nothing.
func TestTradeListTrim(t *testing.T) {
	c, rdb, _ := miniCache(t)
	base := time.Date(2024, 5, 10, 11, 0, 0, 0, time.UTC)
	var trades []store.Trade
	for i := range 250 {
		trades = append(trades, store.Trade{MarketID: "m-1", TradeID: fmt.Sprintf("t%d", i), Venue: "venue_a",
			Price: 0.5, Size: 1, Side: "buy", TS: base.Add(time.Duration(i/3) * time.Microsecond)})
	}
	other := store.Trade{MarketID: "m-2", TradeID: "o1", Venue: "venue_b", Price: 0.1, Size: 2, Side: "sell", TS: base}
	shuffled := slices.Clone(trades)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	apply(t, c, &store.Result{Trades: append(slices.Clone(shuffled[:150]), other)})
	apply(t, c, &store.Result{Trades: shuffled[150:]})
	apply(t, c, &store.Result{Trades: shuffled[:10]})                       // a replay
	apply(t, c, &store.Result{Trades: []store.Trade{trades[0], trades[1]}}) // the oldest, late

	slices.SortFunc(trades, func(a, b store.Trade) int {
		if c := b.TS.Compare(a.TS); c != 0 {
			return c
		}
		return strings.Compare(b.TradeID, a.TradeID)
	})
	var want []string
	for i := range cache.MaxTrades {
		want = append(want, string(cache.RenderTrade(&trades[i])))
	}
	ctx := context.Background()
	got, err := rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: "md:{m:m-1}:t", Start: 0, Stop: -1, Rev: true}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("trades: got %d\n%s\nwant %d\n%s", len(got), strings.Join(got[:min(len(got), 4)], "\n"),
			len(want), strings.Join(want[:4], "\n"))
	}
	scores, err := rdb.ZRangeWithScores(ctx, "md:{m:m-1}:t", 0, 0).Result()
	if err != nil || len(scores) != 1 || scores[0].Score != cache.TradeScore(&trades[cache.MaxTrades-1]) {
		t.Errorf("oldest kept trade's score: got %v, %v; want %v (µs since the epoch)", scores, err, cache.TradeScore(&trades[cache.MaxTrades-1]))
	}
	if got, err := rdb.ZRange(ctx, "md:{m:m-2}:t", 0, -1).Result(); err != nil || !slices.Equal(got, []string{string(cache.RenderTrade(&other))}) {
		t.Errorf("other market: got %q, %v", got, err)
	}
}

// TestApplyReloadsFlushedScripts: after Redis lost its scripts (a restart
// or SCRIPT FLUSH), Apply loads them and writes; the pipeline is not lost.
func TestApplyReloadsFlushedScripts(t *testing.T) {
	c, rdb, _ := miniCache(t)
	ctx := context.Background()
	ev := activeEvent("ev", "politics", map[string]string{"a": "A", "b": "B"})
	applyEvent(t, c, 1, ev)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	ev2 := *ev
	ev2.Title = "after flush"
	applyEvent(t, c, 2, &ev2)
	doc := testRules().RenderEvent(store.EventDoc{ID: "ev", Rev: 2, Event: &ev2})
	checkHash(t, rdb, "md:{e:ev}", map[string]string{"g": "2", "b": string(doc.Body)})
	if l := listingOf(t, rdb, "ev"); l.rev != "2" || l.summary != string(doc.Summary) {
		t.Errorf("listing after flush: got %+v", l)
	}
}

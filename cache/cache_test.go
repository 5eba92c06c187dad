package cache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/cache/cachetest"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

func newCache(t *testing.T) (*cache.Cache, *redis.Client, string) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	return cache.New(rdb, prefix, testRules()), rdb, prefix
}

func apply(t *testing.T, c *cache.Cache, res *store.Result) notice.Change {
	t.Helper()
	n, err := c.Apply(context.Background(), res)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return n
}

func applyEvent(t *testing.T, c *cache.Cache, rev int64, e *store.Event) {
	t.Helper()
	apply(t, c, &store.Result{Events: []store.EventDoc{{ID: e.ID, Rev: rev, Event: e}}})
}

func hash(t *testing.T, rdb *redis.Client, key string) map[string]string {
	t.Helper()
	h, err := rdb.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("hgetall %s: %v", key, err)
	}
	return h
}

// checkHash compares a document hash with want; a price item's change
// number (q) is compared only when want names one.
func checkHash(t *testing.T, rdb *redis.Client, key string, want map[string]string) {
	t.Helper()
	got := hash(t, rdb, key)
	if _, ok := want["q"]; !ok {
		delete(got, "q")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %v\nwant %v", key, got, want)
	}
}

// setsContaining lists every listing set under prefix that holds id.
func setsContaining(t *testing.T, rdb *redis.Client, prefix, id string) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, prefix+"{i}:f:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if err := rdb.ZScore(ctx, k, id).Err(); err == nil {
			out = append(out, strings.TrimPrefix(k, prefix+"{i}:f:"))
		} else if err != redis.Nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

func TestApplyDocuments(t *testing.T) {
	c, rdb, _ := newCache(t)
	two := map[string]string{"a": "A", "b": "B"}
	ev := activeEvent("ev-1", "politics", two)
	merged := activeEvent("ev-2", "politics", two)
	merged.Status, merged.MergedInto = store.StatusMerged, ptr("ev-1")
	m1, m2 := activeMarket("m-1", "ev-1"), activeMarket("m-2", "ev-1")
	price := &store.Price{MarketID: "m-1", Version: 2, TS: testNow, Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.3), ptr(0.4), nil, 5)}}
	evDoc := store.EventDoc{ID: "ev-1", Rev: 5, Event: ev, Markets: []store.Market{m1, m2}}
	m1Doc := store.MarketDoc{ID: "m-1", Rev: 6, Market: &m1, Event: ev, Price: price}
	n := apply(t, c, &store.Result{
		Events: []store.EventDoc{evDoc, {ID: "ev-2", Rev: 7, Event: merged}, {ID: "ev-3", Rev: 8}},
		Markets: []store.MarketDoc{m1Doc,
			{ID: "m-2", Rev: 9, Market: &m2, Event: ev},
			{ID: "m-3", Rev: 10, Price: price}},
	})
	r := testRules()
	// The notice names what was written and carries the price items as
	// written, with the change number each item holds in Redis.
	q := strconv.FormatInt(n.Seq, 10)
	if n.Seq <= 0 || !slices.Equal(n.Events, []string{"ev-1", "ev-2", "ev-3"}) || !slices.Equal(n.Markets, []string{"m-1", "m-2", "m-3"}) {
		t.Fatalf("notice: %+v", n)
	}
	wantPrices := []notice.Price{{ID: "m-1", Rev: 6, Served: true, Body: r.RenderMarket(m1Doc).Body}, {ID: "m-2", Rev: 9, Served: true}, {ID: "m-3", Rev: 10}}
	if got, want := string(notice.Change{Prices: n.Prices}.Encode()), string(notice.Change{Prices: wantPrices}.Encode()); got != want {
		t.Errorf("notice prices:\n got %s\nwant %s", got, want)
	}
	checkHash(t, rdb, c.MarketKey("m-3"), map[string]string{"g": "10", "q": q})
	checkHash(t, rdb, c.EventKey("ev-1"), map[string]string{"g": "5", "b": string(r.RenderEvent(evDoc).Body)})
	checkHash(t, rdb, c.EventKey("ev-2"), map[string]string{"g": "7", "m": "ev-1"})
	checkHash(t, rdb, c.EventKey("ev-3"), map[string]string{"g": "8"})
	checkHash(t, rdb, c.MarketKey("m-1"), map[string]string{"g": "6", "s": "1", "b": string(r.RenderMarket(m1Doc).Body)})
	checkHash(t, rdb, c.MarketKey("m-2"), map[string]string{"g": "9", "s": "1"})
	checkHash(t, rdb, c.MarketKey("m-3"), map[string]string{"g": "10"})

	ctx := context.Background()
	t.Run("event read", func(t *testing.T) {
		tests := []struct {
			id   string
			want cache.EventEntry
		}{
			{"ev-1", cache.EventEntry{Found: true, Rev: 5, Body: r.RenderEvent(evDoc).Body}},
			{"ev-2", cache.EventEntry{Found: true, Rev: 7, MergedInto: "ev-1"}},
			{"ev-3", cache.EventEntry{Found: true, Rev: 8}},
			{"missing", cache.EventEntry{}},
		}
		for _, tt := range tests {
			got, err := cachetest.Event(ctx, rdb, c, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("%s: got %+v, want %+v", tt.id, got, tt.want)
			}
		}
	})
	t.Run("markets read", func(t *testing.T) {
		got, err := c.Markets(ctx, []string{"m-3", "nope", "m-1", "m-2", "m-1"})
		if err != nil {
			t.Fatal(err)
		}
		body := r.RenderMarket(m1Doc).Body
		want := []cache.MarketEntry{
			{Found: true, Rev: 10, Seq: n.Seq},
			{},
			{Found: true, Served: true, Rev: 6, Body: body, Seq: n.Seq},
			{Found: true, Served: true, Rev: 9, Seq: n.Seq},
			{Found: true, Served: true, Rev: 6, Body: body, Seq: n.Seq},
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("got %+v\nwant %+v", got, want)
		}
	})
}

func TestApplyTrades(t *testing.T) {
	c, rdb, _ := newCache(t)
	base := time.Date(2024, 5, 10, 11, 0, 0, 0, time.UTC)
	var trades []store.Trade
	for i := range 250 {
		// Three trades per microsecond; ids of varying length ("t9" > "t10" bytewise).
		trades = append(trades, store.Trade{MarketID: "m-1", TradeID: fmt.Sprintf("t%d", i), Venue: "venue_a",
			Price: 0.5, Size: 1, Side: "buy", TS: base.Add(time.Duration(i/3) * time.Microsecond)})
	}
	other := store.Trade{MarketID: "m-2", TradeID: "o1", Venue: "venue_b", Price: 0.1, Size: 2, Side: "sell", TS: base}
	shuffled := slices.Clone(trades)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	apply(t, c, &store.Result{Trades: append(slices.Clone(shuffled[:150]), other)})
	apply(t, c, &store.Result{Trades: shuffled[150:]})
	apply(t, c, &store.Result{Trades: shuffled[:10]}) // a replay changes nothing

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
	got, err := rdb.ZRevRange(ctx, c.TradesKey("m-1"), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("trades: got %d\n%s\nwant %d\n%s", len(got), strings.Join(got[:min(len(got), 8)], "\n"),
			len(want), strings.Join(want[:8], "\n"))
	}
	page, err := cachetest.Trades(ctx, rdb, c, "m-1", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 5 || string(page[0]) != want[0] || string(page[4]) != want[4] {
		t.Errorf("Trades limit 5: got %q, want the first 5 of %q", page, want[:5])
	}
	if got, err := cachetest.Trades(ctx, rdb, c, "m-2", 50); err != nil || len(got) != 1 || string(got[0]) != string(cache.RenderTrade(&other)) {
		t.Errorf("other market: got %q, %v; want [%s]", got, err, cache.RenderTrade(&other))
	}
}

func TestApplyVersionGuard(t *testing.T) {
	c, rdb, _ := newCache(t)
	two := map[string]string{"a": "A", "b": "B"}
	evOld, evNew := activeEvent("ev", "politics", two), activeEvent("ev", "politics", two)
	evOld.Title, evNew.Title = "old", "new"
	mOld, mNew := activeMarket("m", "ev"), activeMarket("m", "ev")
	mOld.Title, mNew.Title = "old", "new"
	pOld := &store.Price{MarketID: "m", Version: 1, TS: testNow, Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.1), nil, nil, 0)}}
	pNew := &store.Price{MarketID: "m", Version: 2, TS: testNow, Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.2), nil, nil, 0)}}
	r := testRules()
	newEv := store.EventDoc{ID: "ev", Rev: 10, Event: evNew, Markets: []store.Market{mNew}}
	newM := store.MarketDoc{ID: "m", Rev: 10, Market: &mNew, Event: evNew, Price: pNew}
	wantEv := map[string]string{"g": "10", "b": string(r.RenderEvent(newEv).Body)}
	wantM := map[string]string{"g": "10", "s": "1", "b": string(r.RenderMarket(newM).Body)}
	apply(t, c, &store.Result{Events: []store.EventDoc{newEv}, Markets: []store.MarketDoc{newM}})

	for _, rev := range []int64{9, 10} {
		t.Run(fmt.Sprintf("rev %d", rev), func(t *testing.T) {
			apply(t, c, &store.Result{
				Events:  []store.EventDoc{{ID: "ev", Rev: rev, Event: evOld, Markets: []store.Market{mOld}}},
				Markets: []store.MarketDoc{{ID: "m", Rev: rev, Market: &mOld, Event: evOld, Price: pOld}},
			})
			checkHash(t, rdb, c.EventKey("ev"), wantEv)
			checkHash(t, rdb, c.MarketKey("m"), wantM)
			_, sums, err := cachetest.ListPage(context.Background(), rdb, c, "*:*:1", "", 10)
			if err != nil || len(sums) != 1 || string(sums[0]) != string(r.RenderEvent(newEv).Summary) {
				t.Errorf("listing: got %s, %v; want the newer summary", sums, err)
			}
		})
	}
	t.Run("rev 11 replaces", func(t *testing.T) {
		// A newer unserved market document drops the served flag and body.
		apply(t, c, &store.Result{Markets: []store.MarketDoc{{ID: "m", Rev: 11, Price: pOld}}})
		checkHash(t, rdb, c.MarketKey("m"), map[string]string{"g": "11"})
	})
}

func TestApplyListing(t *testing.T) {
	c, rdb, prefix := newCache(t)
	ctx := context.Background()
	r := testRules()
	listed := func(t *testing.T, e *store.Event) {
		t.Helper()
		doc := r.RenderEvent(store.EventDoc{ID: e.ID, Rev: 1, Event: e})
		if got, want := setsContaining(t, rdb, prefix, e.ID), sorted(doc.Sets); !slices.Equal(got, want) {
			t.Errorf("sets: got %q, want %q", got, want)
		}
		for _, set := range []string{"*:*:1", cache.SetName(e.Category, "", ""), cache.SetName("", "venue_a", "2")} {
			ids, sums, err := cachetest.ListPage(ctx, rdb, c, set, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			in := slices.Contains(doc.Sets, set)
			if in && (len(ids) != 1 || ids[0] != e.ID || string(sums[0]) != string(doc.Summary)) {
				t.Errorf("ListPage(%s): got %q %s, want [%s] %s", set, ids, sums, e.ID, doc.Summary)
			} else if !in && len(ids) != 0 {
				t.Errorf("ListPage(%s): got %q, want none", set, ids)
			}
		}
		all, err := c.Summaries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || string(all[e.ID]) != string(doc.Summary) {
			t.Errorf("Summaries: got %s, want only %s", all, doc.Summary)
		}
	}
	unlisted := func(t *testing.T, id string) {
		t.Helper()
		if got := setsContaining(t, rdb, prefix, id); len(got) != 0 {
			t.Errorf("sets: got %q, want none", got)
		}
		if all, err := c.Summaries(ctx); err != nil || len(all) != 0 {
			t.Errorf("Summaries: got %s, %v; want none", all, err)
		}
	}

	ev := activeEvent("ev", "politics", map[string]string{"a": "A", "b": "B"})
	applyEvent(t, c, 1, ev)
	listed(t, ev)

	moved := activeEvent("ev", "sports", map[string]string{"b": "B", "c": "C", "d": "D"})
	applyEvent(t, c, 2, moved)
	listed(t, moved)

	resolved := *moved
	resolved.Status = store.StatusResolved
	applyEvent(t, c, 3, &resolved)
	unlisted(t, "ev")
	if e, _ := cachetest.Event(ctx, rdb, c, "ev"); !strings.Contains(string(e.Body), `"status":"resolved"`) {
		t.Errorf("resolved event body: got %s", e.Body)
	}

	applyEvent(t, c, 4, ev)
	listed(t, ev)
	merged := *ev
	merged.Status, merged.MergedInto = store.StatusMerged, ptr("other")
	applyEvent(t, c, 5, &merged)
	unlisted(t, "ev")

	applyEvent(t, c, 6, moved)
	listed(t, moved)
	applyEvent(t, c, 7, activeEvent("ev", "sports", map[string]string{"b": "B"}))
	unlisted(t, "ev")

	applyEvent(t, c, 6, moved) // stale: must not re-add
	unlisted(t, "ev")
	applyEvent(t, c, 8, ev)
	applyEvent(t, c, 7, moved) // stale: must not move it
	listed(t, ev)
}

func TestListPagePaging(t *testing.T) {
	c, rdb, _ := newCache(t)
	ctx := context.Background()
	ids := []string{"-y", "0", "09", "9", "A", "Z", "Za", "_x", "a", "a-", "a0", "aA", "a_", "b", "E-10", "E-9", "z", "zz"}
	var res store.Result
	for i, id := range ids {
		v := map[string]string{"a": "A", "b": "B"}
		if i%3 == 0 {
			v["c"] = "C"
		}
		res.Events = append(res.Events, store.EventDoc{ID: id, Rev: int64(i + 1), Event: activeEvent(id, "politics", v)})
	}
	res.Events = append(res.Events, store.EventDoc{ID: "b1", Rev: 100, Event: activeEvent("b1", "politics", map[string]string{"a": "A"})})
	apply(t, c, &res)

	want := sorted(ids)
	var wantC []string
	for i, id := range ids {
		if i%3 == 0 {
			wantC = append(wantC, id)
		}
	}
	tests := []struct {
		set   string
		limit int
		want  []string
	}{
		{"*:*:1", 4, want},
		{"*:*:1", 1, want},
		{"*:*:1", 100, want},
		{"politics:venue_c:3", 2, sorted(wantC)},
		{"sports:*:1", 5, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.set, tt.limit), func(t *testing.T) {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				page, sums, err := cachetest.ListPage(ctx, rdb, c, tt.set, after, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > tt.limit || len(sums) != len(page) || pages > len(ids) {
					t.Fatalf("page after %q: got %d ids, %d summaries, limit %d", after, len(page), len(sums), tt.limit)
				}
				for i, s := range sums {
					if !strings.Contains(string(s), `"universal_id":"`+page[i]+`"`) {
						t.Errorf("summary of %s: got %s", page[i], s)
					}
				}
				got = append(got, page...)
				if len(page) < tt.limit {
					break
				}
				after = page[len(page)-1]
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestApplyAfterScriptFlush flushes the scripts of a private Redis: on the
// shared one it would break other packages' tests running meanwhile.
func TestApplyAfterScriptFlush(t *testing.T) {
	rdb, _ := testenv.PrivateRedis(t)
	c := cache.New(rdb, "t:", testRules())
	ctx := context.Background()
	ev := activeEvent("ev", "politics", map[string]string{"a": "A", "b": "B"})
	applyEvent(t, c, 1, ev)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	ev2 := *ev
	ev2.Title = "after flush"
	doc := store.EventDoc{ID: "ev", Rev: 2, Event: &ev2}
	applyEvent(t, c, 2, &ev2)
	checkHash(t, rdb, c.EventKey("ev"), map[string]string{"g": "2", "b": string(testRules().RenderEvent(doc).Body)})
	if _, sums, err := cachetest.ListPage(ctx, rdb, c, "*:*:1", "", 10); err != nil || len(sums) != 1 || !strings.Contains(string(sums[0]), "after flush") {
		t.Errorf("listing after flush: got %s, %v", sums, err)
	}
}

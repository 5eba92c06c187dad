package store_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketdata/marketdata/store"
)

// Each kind is written with every column as given, times in UTC whatever the
// input's zone, and JSON in the wire shape.
func TestApplyBatchRows(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	at := time.Date(2025, 6, 1, 12, 30, 0, 123456000, cet)
	utc := at.UTC()

	t.Run("event", func(t *testing.T) {
		t.Parallel()
		in := store.Event{
			ID: "ev-1", Version: 3, Title: "Who wins?", Category: "politics", Status: store.StatusMerged,
			MergedInto: ptr("ev-0"), VenueIDs: [4]*string{ptr("KX-1"), nil, ptr("c-1"), ptr("d-1")},
			Volume: 12345.5, UpdatedAt: at,
		}
		res := apply(t, s, &store.Batch{Events: []store.Event{in}})
		if !res.Applied["event:ev-1"] {
			t.Errorf("Applied = %v, want event:ev-1", appliedKeys(res.Applied))
		}
		want := in
		want.UpdatedAt = utc
		if got := readEvent(t, pool, "ev-1"); show(got) != show(&want) {
			t.Errorf("event row:\n got %s\nwant %s", show(got), show(&want))
		}
	})

	for _, tc := range []struct {
		name       string
		status     string
		resolvedAt *time.Time
		result     *string
	}{
		{"market active", store.StatusActive, nil, nil},
		{"market resolved", store.StatusResolved, &at, ptr("yes")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "mk-" + tc.status
			in := store.Market{
				ID: id, EventID: "ev-9", Version: 7, Title: "Above 50%?", Status: tc.status,
				Venues:     map[string]string{"venue_a": "KX-M", "venue_d": "d-m"},
				ResolvedAt: tc.resolvedAt, Result: tc.result, UpdatedAt: at,
			}
			res := apply(t, s, &store.Batch{Markets: []store.Market{in}})
			if !res.Applied["market:"+id] {
				t.Errorf("Applied = %v, want market:%s", appliedKeys(res.Applied), id)
			}
			want := in
			want.UpdatedAt = utc
			if tc.resolvedAt != nil {
				want.ResolvedAt = &utc
			}
			got, venues := readMarket(t, pool, id)
			if show(got) != show(&want) {
				t.Errorf("market row:\n got %s\nwant %s", show(got), show(&want))
			}
			if want := `{"venue_a":"KX-M","venue_d":"d-m"}`; !jsonEqual(t, venues, want) {
				t.Errorf("venues column: got %s, want %s", venues, want)
			}
		})
	}

	t.Run("price", func(t *testing.T) {
		t.Parallel()
		in := store.Price{MarketID: "mk-p", Version: 2, TS: at, Quotes: map[string]store.Quote{
			"venue_a": {Bid: ptr(0.41), Ask: ptr(0.45), Last: ptr(0.43), Volume24h: 1200},
			"venue_c": {Bid: nil, Ask: ptr(1.0), Last: nil, Volume24h: 0},
		}}
		res := apply(t, s, &store.Batch{Prices: []store.Price{in}})
		if !res.Applied["price:mk-p"] {
			t.Errorf("Applied = %v, want price:mk-p", appliedKeys(res.Applied))
		}
		want := in
		want.TS = utc
		got, quotes := readPrice(t, pool, "mk-p")
		if show(got) != show(&want) {
			t.Errorf("price row:\n got %s\nwant %s", show(got), show(&want))
		}
		wantQuotes := `{"venue_a":{"bid":0.41,"ask":0.45,"last":0.43,"volume_24h":1200},
			"venue_c":{"bid":null,"ask":1,"last":null,"volume_24h":0}}`
		if !jsonEqual(t, quotes, wantQuotes) {
			t.Errorf("quotes column: got %s, want %s", quotes, wantQuotes)
		}
	})

	t.Run("trade", func(t *testing.T) {
		t.Parallel()
		in := store.Trade{MarketID: "mk-t", TradeID: "tr-1", Venue: "venue_c", Price: 0.37, Size: 250.5, Side: "sell", TS: at}
		res := apply(t, s, &store.Batch{Trades: []store.Trade{in}})
		if !res.Applied["trade:tr-1"] {
			t.Errorf("Applied = %v, want trade:tr-1", appliedKeys(res.Applied))
		}
		want := in
		want.TS = utc
		var got []store.Trade
		for _, tr := range readTrades(t, pool) {
			if tr.MarketID == "mk-t" {
				got = append(got, tr)
			}
		}
		if show(got) != show([]store.Trade{want}) {
			t.Errorf("trade rows:\n got %s\nwant %s", show(got), show([]store.Trade{want}))
		}
	})
}

// versionedKind builds updates of one kind whose content depends on variant,
// and reads its row back. Builders use UTC times, so an update is also the
// row it writes.
type versionedKind struct {
	name string
	item func(id string, version int64, variant int) any
	row  func(t *testing.T, pool *pgxpool.Pool, id string) any
}

func (k versionedKind) batch(id string, version int64, variant int) *store.Batch {
	var b store.Batch
	switch x := k.item(id, version, variant).(type) {
	case *store.Event:
		b.Events = append(b.Events, *x)
	case *store.Market:
		b.Markets = append(b.Markets, *x)
	case *store.Price:
		b.Prices = append(b.Prices, *x)
	}
	return &b
}

var versionedKinds = []versionedKind{
	{
		name: "event",
		item: func(id string, v int64, variant int) any {
			e := newEvent(id, v)
			e.Volume = float64(variant)
			return &e
		},
		row: func(t *testing.T, pool *pgxpool.Pool, id string) any { return readEvent(t, pool, id) },
	},
	{
		name: "market",
		item: func(id string, v int64, variant int) any {
			m := newMarket(id, "ev", v)
			m.Venues["venue_b"] = string(rune('a' + variant))
			return &m
		},
		row: func(t *testing.T, pool *pgxpool.Pool, id string) any { m, _ := readMarket(t, pool, id); return m },
	},
	{
		name: "price",
		item: func(id string, v int64, variant int) any {
			p := newPrice(id, v)
			p.Quotes["venue_d"] = store.Quote{Last: ptr(float64(variant) / 10)}
			return &p
		},
		row: func(t *testing.T, pool *pgxpool.Pool, id string) any { p, _ := readPrice(t, pool, id); return p },
	},
}

type update struct {
	version int64
	variant int
}

// An update applies only when its version is above the stored one.
func TestApplyBatchVersioning(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	for _, kind := range versionedKinds {
		for _, tc := range []struct {
			name        string
			updates     []update
			wantApplied []bool
			want        update
		}{
			{"replay", []update{{3, 1}, {3, 1}}, []bool{true, false}, update{3, 1}},
			{"older after newer", []update{{5, 1}, {3, 2}}, []bool{true, false}, update{5, 1}},
			{"equal version, other content", []update{{4, 1}, {4, 2}}, []bool{true, false}, update{4, 1}},
			{"newer after older", []update{{3, 1}, {9, 2}, {8, 3}}, []bool{true, true, false}, update{9, 2}},
		} {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				id := kind.name + "-" + tc.name
				key := kind.name + ":" + id
				for i, u := range tc.updates {
					res := apply(t, s, kind.batch(id, u.version, u.variant))
					if got := res.Applied[key]; got != tc.wantApplied[i] {
						t.Errorf("update %d (v%d): Applied[%s] = %v, want %v", i, u.version, key, got, tc.wantApplied[i])
					}
				}
				if got, want := show(kind.row(t, pool, id)), show(kind.item(id, tc.want.version, tc.want.variant)); got != want {
					t.Errorf("row:\n got %s\nwant %s", got, want)
				}
			})
		}
	}
}

// A batch applied twice changes nothing the second time, not even ingested_at.
func TestApplyBatchReplayIsNoop(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	batch := func() *store.Batch {
		return &store.Batch{
			Events:  []store.Event{newEvent("e1", 2)},
			Markets: []store.Market{newMarket("m1", "e1", 3)},
			Prices:  []store.Price{newPrice("m1", 4)},
			Trades:  []store.Trade{newTrade("m1", "t1", t0)},
		}
	}
	res := apply(t, s, batch())
	if got, want := show(appliedKeys(res.Applied)), `["event:e1","market:m1","price:m1","trade:t1"]`; got != want {
		t.Errorf("first Applied = %s, want %s", got, want)
	}
	tables := [][2]string{{"events", "universal_id"}, {"markets", "universal_id"}, {"prices", "market_id"}, {"trades", "trade_id"}}
	before := map[string]string{}
	for _, tb := range tables {
		before[tb[0]] = tableJSON(t, pool, tb[0], tb[1])
	}
	time.Sleep(10 * time.Millisecond) // a rewrite would show in ingested_at
	res = apply(t, s, batch())
	if len(appliedKeys(res.Applied)) != 0 {
		t.Errorf("second Applied = %v, want none", appliedKeys(res.Applied))
	}
	for _, tb := range tables {
		if got := tableJSON(t, pool, tb[0], tb[1]); got != before[tb[0]] {
			t.Errorf("%s changed by a replay:\n got %s\nwant %s", tb[0], got, before[tb[0]])
		}
	}
}

// Several updates of one key in a batch: the highest version wins, whatever
// their order.
func TestApplyBatchDedup(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	for _, kind := range versionedKinds {
		for _, order := range [][]int64{{2, 7, 4}, {7, 4, 2}, {2, 4, 7}, {4, 7, 7}} {
			t.Run(kind.name+"/"+show(order), func(t *testing.T) {
				t.Parallel()
				id := kind.name + "-dedup-" + show(order)
				var b store.Batch
				for _, v := range order {
					u := kind.batch(id, v, int(v))
					b.Events, b.Markets, b.Prices = append(b.Events, u.Events...), append(b.Markets, u.Markets...), append(b.Prices, u.Prices...)
				}
				// Another key in the same batch keeps its own update.
				other := kind.batch(id+"-other", 1, 1)
				b.Events, b.Markets, b.Prices = append(b.Events, other.Events...), append(b.Markets, other.Markets...), append(b.Prices, other.Prices...)
				res := apply(t, s, &b)
				want := []string{kind.name + ":" + id, kind.name + ":" + id + "-other"}
				if got := appliedKeys(res.Applied); show(got) != show(want) {
					t.Errorf("Applied = %v, want %v", got, want)
				}
				if got, want := show(kind.row(t, pool, id)), show(kind.item(id, 7, 7)); got != want {
					t.Errorf("row:\n got %s\nwant %s", got, want)
				}
			})
		}
	}
}

// Trades are immutable and deduplicated by trade_id, within a batch and across batches.
func TestApplyBatchTradesDedup(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	t1 := newTrade("m1", "t1", t0)
	t1dup := t1
	t1dup.Price, t1dup.Side = 0.9, "sell" // a redelivery never rewrites the trade
	t2 := newTrade("m1", "t2", t0.Add(time.Second))
	t3 := newTrade("m2", "t3", t0.Add(2*time.Second))

	res := apply(t, s, &store.Batch{Trades: []store.Trade{t1, t2, t1dup}})
	if got, want := show(appliedKeys(res.Applied)), `["trade:t1","trade:t2"]`; got != want {
		t.Errorf("first Applied = %s, want %s", got, want)
	}
	res = apply(t, s, &store.Batch{Trades: []store.Trade{t3, t1dup, t1}})
	if got, want := show(appliedKeys(res.Applied)), `["trade:t3"]`; got != want {
		t.Errorf("second Applied = %s, want %s", got, want)
	}
	// Result.Trades carries every trade of the batch, once each, new or not.
	if got, want := len(res.Trades), 2; got != want {
		t.Errorf("second Result.Trades: got %d trades %s, want %d", got, show(res.Trades), want)
	}
	if got, want := show(readTrades(t, pool)), show([]store.Trade{t1, t2, t3}); got != want {
		t.Errorf("trade rows:\n got %s\nwant %s", got, want)
	}
}

func TestInsertRejects(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	at := time.Date(2025, 6, 1, 8, 0, 0, 500000000, cet)
	r1 := store.Reject{Subject: "updates.price.m1", Kind: "price", Reason: "bad JSON", Payload: []byte("{oops"), StreamSeq: 41, ReceivedAt: at}
	r2 := store.Reject{Subject: "updates.trade.m1", Kind: "trade", Reason: "size <= 0", Payload: nil, StreamSeq: 42, ReceivedAt: at}
	r1again := r1
	r1again.Reason = "redelivered"
	r3 := r1 // same stream_seq, other subject: another reject
	r3.Subject = "updates.price.m2"

	if err := s.InsertRejects(t.Context(), []store.Reject{r1, r2, r1again}); err != nil {
		t.Fatalf("InsertRejects: %v", err)
	}
	if err := s.InsertRejects(t.Context(), []store.Reject{r1again, r3}); err != nil {
		t.Fatalf("InsertRejects again: %v", err)
	}
	if err := s.InsertRejects(t.Context(), nil); err != nil {
		t.Fatalf("InsertRejects(nil): %v", err)
	}

	rows, err := pool.Query(t.Context(), `
		SELECT subject, kind, reason, payload, stream_seq, received_at
		FROM ingest_rejects ORDER BY stream_seq, subject`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []store.Reject
	for rows.Next() {
		var r store.Reject
		var seq int64
		if err := rows.Scan(&r.Subject, &r.Kind, &r.Reason, &r.Payload, &seq, &r.ReceivedAt); err != nil {
			t.Fatal(err)
		}
		r.StreamSeq, r.ReceivedAt = uint64(seq), r.ReceivedAt.UTC()
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []store.Reject{r1, r3, r2}
	for i := range want {
		want[i].ReceivedAt = at.UTC()
	}
	want[2].Payload = []byte{}
	if show(got) != show(want) {
		t.Errorf("ingest_rejects rows:\n got %s\nwant %s", show(got), show(want))
	}
}

// UpsertPrices, the benchmark's baseline, follows the same version rule.
func TestUpsertPrices(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	for _, tc := range []struct {
		prices []store.Price
		want   int
	}{
		{[]store.Price{newPrice("p1", 2), newPrice("p2", 1)}, 2},
		{[]store.Price{newPrice("p1", 2), newPrice("p2", 3), newPrice("p3", 1)}, 2},
		{[]store.Price{newPrice("p1", 1)}, 0},
	} {
		n, err := s.UpsertPrices(t.Context(), tc.prices)
		if err != nil {
			t.Fatalf("UpsertPrices: %v", err)
		}
		if n != tc.want {
			t.Errorf("UpsertPrices(%s) applied %d, want %d", show(tc.prices), n, tc.want)
		}
	}
	for id, v := range map[string]int64{"p1": 2, "p2": 3, "p3": 1} {
		if got, _ := readPrice(t, pool, id); show(got) != show(ptr(newPrice(id, v))) {
			t.Errorf("price %s: got %s, want version %d", id, show(got), v)
		}
	}
}

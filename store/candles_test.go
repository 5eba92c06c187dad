package store_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketdata/marketdata/internal/candletest"
	"github.com/marketdata/marketdata/store"
)

// cbase is the candle tests' base time: this hour, so the rows land in the
// partitions ingest makes around now.
var cbase = time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)

func at(minutes, seconds int) time.Time {
	return cbase.Add(time.Duration(minutes)*time.Minute + time.Duration(seconds)*time.Second)
}

func quote(bid, ask float64) store.Quote { return store.Quote{Bid: ptr(bid), Ask: ptr(ask)} }

func cprice(market string, version int64, ts time.Time, venues ...any) store.Price {
	p := store.Price{MarketID: market, Version: version, TS: ts, Quotes: map[string]store.Quote{}}
	for i := 0; i < len(venues); i += 2 {
		p.Quotes[venues[i].(string)] = venues[i+1].(store.Quote)
	}
	return p
}

func ctrade(market, id, venue string, price, size float64, ts time.Time) store.Trade {
	return store.Trade{MarketID: market, TradeID: id, Venue: venue, Price: price, Size: size, Side: "buy", TS: ts}
}

// compareCandles checks every series and interval of markets against the
// model, over [from, to).
func compareCandles(t *testing.T, s *store.Store, m *candletest.Model, markets []string, from, to time.Time) {
	t.Helper()
	for _, market := range markets {
		for _, series := range store.CandleSeries {
			for _, interval := range store.CandleIntervals {
				step, _ := store.CandleStep(interval)
				got, err := s.Candles(t.Context(), market, interval, series, from, to)
				if err != nil {
					t.Fatalf("Candles(%s, %s, %s): %v", market, interval, series, err)
				}
				want := m.Candles(market, step, series, from, to)
				if g, w := show(got), show(want); g != w {
					t.Errorf("Candles(%s, %s, %s, %s, %s):\n got: %.1500s\nwant: %.1500s", market, interval, series,
						from.Format(time.RFC3339), to.Format(time.RFC3339), g, w)
				}
			}
		}
	}
}

// fold folds the candle queues (what ingest does about once a second).
func fold(t *testing.T, s *store.Store) {
	t.Helper()
	if _, err := s.FoldCandles(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
}

// applyBoth applies a batch to the store and the model.
func applyBoth(t *testing.T, s *store.Store, m *candletest.Model, prices []store.Price, trades []store.Trade) *store.Result {
	t.Helper()
	m.ApplyBatch(prices, trades)
	return apply(t, s, &store.Batch{Prices: prices, Trades: trades})
}

// TestCandlesBatchRules: what counts in a candle, batch by batch — several
// versions of a market in one batch each count; a version not above the
// stored one counts nothing, in a batch of its own or beside newer ones; a
// late price lands in its own bucket and changes later opens; a trade
// delivered again counts once; a venue with no bid leaves its side empty.
func TestCandlesBatchRules(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	m := candletest.New()
	a, b := store.Venues[0], store.Venues[1]
	applyBoth(t, s, m, []store.Price{
		cprice("M1", 3, at(0, 10), a, quote(0.40, 0.50), b, quote(0.42, 0.52)),
		cprice("M1", 5, at(0, 40), a, quote(0.45, 0.50)),
		cprice("M1", 4, at(0, 20), a, quote(0.30, 0.60), b, quote(0.31, 0.61)), // below 5 but above the stored: counts
		cprice("M2", 1, at(2, 0), b, quote(0.10, 0.20)),
	}, []store.Trade{ctrade("M1", "T1", a, 0.44, 2, at(0, 15)), ctrade("M1", "T2", b, 0.46, 0.5, at(0, 15))})
	res := applyBoth(t, s, m, []store.Price{
		cprice("M1", 4, at(5, 0), a, quote(0.99, 0.99)), // not above the stored 5: ignored
		cprice("M1", 6, at(4, 0), a, quote(0.47, 0.49)),
		cprice("M1", 7, at(1, 30), b, store.Quote{Ask: ptr(0.48)}), // late, and no bid
		cprice("M2", 1, at(3, 0), b, quote(0.9, 0.95)),             // a redelivery: ignored
	}, []store.Trade{
		ctrade("M1", "T1", a, 0.44, 2, at(0, 15)),   // delivered again
		ctrade("M1", "T3", a, 0.41, 1.25, at(0, 5)), // late
		ctrade("M2", "T4", b, 0.15, 3, at(7, 59)),
	})
	if res.Applied["trade:T1"] || !res.Applied["trade:T3"] || res.Applied["price:M2"] {
		t.Errorf("applied %v: want T3 and not T1 nor M2's price", appliedKeys(res.Applied))
	}
	applyBoth(t, s, m, nil, []store.Trade{ctrade("M1", "T1", a, 0.44, 2, at(0, 15))}) // again, alone
	applyBoth(t, s, m, []store.Price{cprice("M1", 5, at(9, 0), a, quote(0.01, 0.02))}, nil)
	markets := []string{"M1", "M2", "M3"}
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(2*time.Hour))
	compareCandles(t, s, m, markets, at(1, 0), at(6, 0))              // data before: from the first bucket
	compareCandles(t, s, m, markets, at(3, 30), at(3, 40))            // inside one bucket
	compareCandles(t, s, m, markets, at(10, 0), at(20, 0))            // after the last data
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), at(0, 0)) // before any data: none

	// The first candles, by hand: the model is checked too.
	got, err := s.Candles(t.Context(), "M1", "1m", "all", cbase, at(3, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"start":"` + at(0, 0).Format(time.RFC3339) + `","trades":3,"volume":3.75,` +
		`"trade":{"open":0.41,"high":0.46,"low":0.41,"close":0.46},` +
		`"bid":{"open":0.42,"high":0.45,"low":0.31,"close":0.45},"ask":{"open":0.5,"high":0.6,"low":0.5,"close":0.5}},` +
		`{"start":"` + at(1, 0).Format(time.RFC3339) + `","trades":0,"volume":0,"trade":null,` +
		`"bid":{"open":0.45,"high":0.45,"low":0.45,"close":null},"ask":{"open":0.5,"high":0.5,"low":0.48,"close":0.48}},` +
		`{"start":"` + at(2, 0).Format(time.RFC3339) + `","trades":0,"volume":0,"trade":null,` +
		`"bid":{"open":null,"high":null,"low":null,"close":null},"ask":{"open":0.48,"high":0.48,"low":0.48,"close":0.48}}]`
	if g := mustJSON(t, got); !jsonEqual(t, g, want) {
		t.Errorf("M1 all 1m:\n got %s\nwant %s", g, want)
	}
	got, err = s.Candles(t.Context(), "M1", "1m", b, at(1, 0), at(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	want = `[{"start":"` + at(1, 0).Format(time.RFC3339) + `","trades":0,"volume":0,"trade":null,` +
		`"bid":{"open":0.31,"high":0.31,"low":0.31,"close":null},"ask":{"open":0.61,"high":0.61,"low":0.48,"close":0.48}}]`
	if g := mustJSON(t, got); !jsonEqual(t, g, want) {
		t.Errorf("M1 venue_b 1m:\n got %s\nwant %s", g, want)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCandlesMatches: the market's match metadata decides what the series
// hold — a complement venue's quotes and trades inverted (in its own series
// and in all), a subset venue's only in its own series.
func TestCandlesMatches(t *testing.T) {
	t.Parallel()
	_, pool := setup(t)
	ctx := t.Context()
	a, b, c := store.Venues[0], store.Venues[1], store.Venues[2]
	apply(t, store.New(pool), &store.Batch{Markets: []store.Market{newMarket("MX", "EX", 1)}})
	// Set as the match metadata's migration stores it; a store without the
	// market in memory reads it from the row.
	if _, err := pool.Exec(ctx, `UPDATE markets SET matches = $1 WHERE universal_id = 'MX'`,
		`{"venue_a":{"relation":"identity","confidence":1,"method":"manual"},`+
			`"venue_b":{"relation":"complement","confidence":0.9,"method":"rules"},`+
			`"venue_c":{"relation":"subset","confidence":0.5,"method":"model"}}`); err != nil {
		t.Fatal(err)
	}
	m := candletest.New()
	m.Relations["MX"] = [4]string{store.RelationIdentity, store.RelationComplement, store.RelationSubset, ""}
	batches := []struct {
		prices []store.Price
		trades []store.Trade
	}{
		{[]store.Price{cprice("MX", 1, at(0, 1), a, quote(0.40, 0.50), b, quote(0.30, 0.55), c, quote(0.70, 0.80))},
			[]store.Trade{ctrade("MX", "X1", b, 0.7, 1, at(0, 2)), ctrade("MX", "X2", c, 0.9, 1, at(0, 3))}},
		{[]store.Price{cprice("MX", 2, at(1, 1), b, quote(0.2, 0.3), c, quote(0.1, 0.2))},
			[]store.Trade{ctrade("MX", "X3", a, 0.45, 2, at(1, 2))}},
	}
	for _, bt := range batches {
		m.ApplyBatch(bt.prices, bt.trades)
		// A fresh store each time: its cached market rows do not carry the
		// metadata until the match metadata reads it, the markets row does.
		apply(t, store.New(pool), &store.Batch{Prices: bt.prices, Trades: bt.trades})
	}
	s := store.New(pool)
	compareCandles(t, s, m, []string{"MX"}, cbase, at(5, 0))
	got, err := s.Candles(ctx, "MX", "1m", "all", cbase, at(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	// venue_b inverted: bid 1 − 0.55 = 0.45 beats venue_a's 0.40, ask 1 −
	// 0.30 = 0.70; venue_c (subset) never counts; the trade on venue_b at
	// 1 − 0.7.
	want := `[{"start":"` + at(0, 0).Format(time.RFC3339) + `","trades":1,"volume":1,` +
		`"trade":{"open":0.3,"high":0.3,"low":0.3,"close":0.3},` +
		`"bid":{"open":0.45,"high":0.45,"low":0.45,"close":0.45},"ask":{"open":0.5,"high":0.5,"low":0.5,"close":0.5}}]`
	if g := mustJSON(t, got); !jsonEqual(t, g, want) {
		t.Errorf("MX all:\n got %s\nwant %s", g, want)
	}
}

// TestCandlesRandomBatches holds random batches (several versions of a
// market, versions not above the stored one, late prices and trades, trades
// delivered again) to the model.
func TestCandlesRandomBatches(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	m := candletest.New()
	rng := rand.New(rand.NewPCG(20, 1))
	markets := []string{"R1", "R2", "R3"}
	gen := newCandleGen(rng, markets)
	for range 40 {
		prices, trades := gen.batch(1 + rng.IntN(12))
		applyBoth(t, s, m, prices, trades)
		if rng.IntN(4) == 0 {
			fold(t, s) // part folded, part queued: reads take both
		}
	}
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(26*time.Hour))
	compareCandles(t, s, m, markets, at(95, 17), at(400, 0))
	fold(t, s)
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(26*time.Hour))
}

// TestCandlePointsQueuedPacked: a batch statement queues its points as one
// row of candle_point_batches (migration 009), however many there are, and
// none for a batch that applied none; reads take them before the fold, and
// the fold moves them. Rows an older release queued in candle_points_new
// (one a point, during a rolling upgrade) are read and folded beside them.
func TestCandlePointsQueuedPacked(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := t.Context()
	m := candletest.New()
	markets := []string{"Q1", "Q2", "Q3"}
	queued := func() (batches, points, rows int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM candle_point_batches),
			(SELECT count(*) FROM candle_point_batch_rows), (SELECT count(*) FROM candle_points_new)`).Scan(&batches, &points, &rows); err != nil {
			t.Fatal(err)
		}
		return batches, points, rows
	}
	// Q1 twice in one batch: both versions count (each is a point).
	applyBoth(t, s, m, []store.Price{
		cprice("Q1", 1, at(10, 0), "venue_a", quote(0.40, 0.42)),
		cprice("Q1", 2, at(10, 30), "venue_a", quote(0.41, 0.43), "venue_b", quote(0.39, 0.45)),
		cprice("Q2", 1, at(11, 0), "venue_b", quote(0.60, 0.62)),
	}, nil)
	if b, p, r := queued(); b != 1 || p != 3 || r != 0 {
		t.Fatalf("after a batch of 3 points: %d queued batches holding %d points, %d queued rows; want 1, 3, 0", b, p, r)
	}
	// Versions not above the stored ones: no point, so no row at all.
	applyBoth(t, s, m, []store.Price{cprice("Q1", 2, at(12, 0), "venue_a", quote(0.10, 0.90))}, nil)
	if b, p, _ := queued(); b != 1 || p != 3 {
		t.Fatalf("after a batch that applied nothing: %d queued batches holding %d points; want 1, 3", b, p)
	}
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(2*time.Hour))

	// What an older release queues: one candle_points_new row a point.
	applyBoth(t, s, m, []store.Price{
		cprice("Q2", 2, at(16, 0), "venue_b", quote(0.58, 0.61)),
		cprice("Q3", 1, at(17, 0), "venue_c", quote(0.20, 0.30), "venue_d", quote(0.22, 0.31)),
	}, nil)
	if _, err := pool.Exec(ctx, `WITH b AS (
		DELETE FROM candle_point_batches WHERE 'Q3' = ANY(market_id) RETURNING *
	)
	INSERT INTO candle_points_new
	SELECT p.* FROM b CROSS JOIN LATERAL unnest(b.market_id, b.ts, b.version, b.present, b.all_bid, b.all_ask,
		b.a_bid, b.a_ask, b.b_bid, b.b_ask, b.c_bid, b.c_ask, b.d_bid, b.d_ask) AS p`); err != nil {
		t.Fatal(err)
	}
	if b, p, r := queued(); b != 1 || p != 3 || r != 2 {
		t.Fatalf("after moving a batch to the row queue: %d queued batches holding %d points, %d queued rows; want 1, 3, 2", b, p, r)
	}
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(2*time.Hour))

	res, err := s.FoldCandles(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if res.Points != 5 {
		t.Errorf("the fold moved %d points, want 5", res.Points)
	}
	if b, p, r := queued(); b != 0 || p != 0 || r != 0 {
		t.Fatalf("after the fold: %d queued batches holding %d points, %d queued rows; want none", b, p, r)
	}
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(2*time.Hour))
}

// TestCandlesFoldMarks: the fold's marks move through the data while more
// of it comes: each fold closes up to where the data has come (now follows
// its clock), so later messages are partly open, partly late for the 5m
// buckets, the hours and the days rolled up; at the end the clock jumps two
// days ahead and more batches come, all late. Every interval and series
// agrees with the model after each phase, folded and not.
func TestCandlesFoldMarks(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	m := candletest.New()
	rng := rand.New(rand.NewPCG(20, 3))
	markets := []string{"F1", "F2", "F3"}
	gen := newCandleGen(rng, markets)
	var newest time.Time
	batch := func() {
		prices, trades := gen.batch(1 + rng.IntN(12))
		for _, p := range prices {
			if p.TS.After(newest) {
				newest = p.TS
			}
		}
		applyBoth(t, s, m, prices, trades)
	}
	foldAt := func(now time.Time) {
		t.Helper()
		if _, err := s.FoldCandles(t.Context(), now); err != nil {
			t.Fatal(err)
		}
	}
	for range 60 {
		batch()
		foldAt(newest.Add(-time.Duration(rng.IntN(90)) * time.Minute))
	}
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(30*time.Hour))
	foldAt(cbase.Add(48 * time.Hour)) // past a day's end: every hour and day rolled up
	foldAt(cbase.Add(48 * time.Hour))
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(30*time.Hour))
	for range 20 {
		batch() // all late now
	}
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(30*time.Hour))
	foldAt(cbase.Add(48 * time.Hour))
	compareCandles(t, s, m, markets, cbase.Add(-time.Hour), cbase.Add(30*time.Hour))
	compareCandles(t, s, m, markets, at(95, 17), at(400, 0))
}

// candleGen makes random price and trade messages over a few hours from
// cbase: versions mostly rising per market, some repeated or lower, ts mostly
// rising with some late, trades sometimes repeated.
type candleGen struct {
	rng      *rand.Rand
	markets  []string
	version  map[string]int64
	clock    map[string]time.Duration
	trades   []store.Trade
	tradeSeq int
}

func newCandleGen(rng *rand.Rand, markets []string) *candleGen {
	return &candleGen{rng: rng, markets: markets, version: map[string]int64{}, clock: map[string]time.Duration{}}
}

func (g *candleGen) cents() float64 { return float64(1+g.rng.IntN(98)) / 100 }

func (g *candleGen) price() store.Price {
	market := g.markets[g.rng.IntN(len(g.markets))]
	v := g.version[market] + 1 + int64(g.rng.IntN(2))
	if g.rng.IntN(8) == 0 && g.version[market] > 1 {
		v = 1 + g.rng.Int64N(g.version[market]) // not above: ignored unless above what was stored
	} else {
		g.version[market] = v
	}
	g.clock[market] += time.Duration(g.rng.IntN(400)) * time.Second
	ts := cbase.Add(g.clock[market]).Add(time.Duration(g.rng.IntN(1e6)) * time.Microsecond)
	if g.rng.IntN(6) == 0 {
		ts = ts.Add(-time.Duration(g.rng.IntN(3600)) * time.Second) // late
	}
	p := store.Price{MarketID: market, Version: v, TS: ts, Quotes: map[string]store.Quote{}}
	for _, venue := range store.Venues {
		if g.rng.IntN(3) == 0 {
			continue
		}
		q := quote(g.cents(), g.cents())
		if g.rng.IntN(10) == 0 {
			q.Bid = nil
		}
		p.Quotes[venue] = q
	}
	return p
}

func (g *candleGen) trade() store.Trade {
	if len(g.trades) > 0 && g.rng.IntN(5) == 0 {
		return g.trades[g.rng.IntN(len(g.trades))] // delivered again
	}
	market := g.markets[g.rng.IntN(len(g.markets))]
	g.tradeSeq++
	ts := cbase.Add(g.clock[market]).Add(-time.Duration(g.rng.IntN(1800)) * time.Second)
	if g.rng.IntN(4) == 0 && len(g.trades) > 0 {
		ts = g.trades[len(g.trades)-1].TS // the same ts as another: ordered by trade id
	}
	t := ctrade(market, fmt.Sprintf("T%04d", g.rng.IntN(10000)*10+g.tradeSeq%10), store.Venues[g.rng.IntN(4)],
		g.cents(), float64(1+g.rng.IntN(16))/4, ts)
	g.trades = append(g.trades, t)
	return t
}

func (g *candleGen) batch(n int) ([]store.Price, []store.Trade) {
	var prices []store.Price
	var trades []store.Trade
	for range n {
		if g.rng.IntN(3) == 0 {
			trades = append(trades, g.trade())
		} else {
			prices = append(prices, g.price())
		}
	}
	return prices, trades
}

// TestCandlesQuery: the intervals and series Candles takes, and its limit.
func TestCandlesQuery(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := t.Context()
	for _, c := range []struct{ interval, series, err string }{
		{"2m", "all", `unknown interval "2m"`},
		{"1h", "venue_e", `unknown series "venue_e"`},
		{"1h", "", `unknown series ""`},
	} {
		if _, err := s.Candles(ctx, "M1", c.interval, c.series, cbase, at(60, 0)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Candles(%q, %q): err %v, want %q", c.interval, c.series, err, c.err)
		}
	}
	if _, err := s.Candles(ctx, "M1", "1m", "all", cbase, cbase.Add(store.MaxCandles*time.Minute)); err != nil {
		t.Errorf("Candles of %d candles: %v", store.MaxCandles, err)
	}
	if _, err := s.Candles(ctx, "M1", "1m", "all", cbase, cbase.Add(store.MaxCandles*time.Minute+time.Second)); err == nil ||
		!strings.Contains(err.Error(), "5001 candles") {
		t.Errorf("Candles of 5001 candles: err %v, want the count", err)
	}
	for _, to := range []time.Time{cbase, cbase.Add(-time.Hour)} {
		got, err := s.Candles(ctx, "M1", "1h", "all", cbase, to)
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("Candles to %s: %v, %v; want an empty list", to, got, err)
		}
	}
	for _, c := range []struct {
		interval   string
		from, to   time.Time
		start      time.Time
		n          int
		stepMinute int
	}{
		{"15m", at(7, 3), at(60, 0), at(0, 0), 4, 15},
		{"4h", cbase, cbase.Add(4*time.Hour + time.Nanosecond), cbase.Truncate(4 * time.Hour), 0, 240},
		{"1d", cbase, cbase.Add(time.Minute), cbase.Truncate(24 * time.Hour), 1, 1440},
	} {
		step, ok := store.CandleStep(c.interval)
		if !ok || step != time.Duration(c.stepMinute)*time.Minute {
			t.Errorf("CandleStep(%s) = %v, %v", c.interval, step, ok)
		}
		start, n := store.CandleBuckets(step, c.from, c.to)
		if c.n == 0 {
			c.n = int((c.to.Sub(start) + step - 1) / step)
		}
		if !start.Equal(c.start) || n != c.n {
			t.Errorf("CandleBuckets(%s, %s, %s) = %s, %d; want %s, %d", c.interval, c.from, c.to, start, n, c.start, c.n)
		}
	}
}

// countRows counts a table's rows.
func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

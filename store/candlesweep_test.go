package store_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketdata/marketdata/internal/candletest"
	"github.com/marketdata/marketdata/store"
)

func partitions(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
		SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass ORDER BY 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 0, 0, 0, time.UTC) }

// monthly names the partitions of candle_points, then candle_trades, of months.
func monthly(months ...string) []string {
	var out []string
	for _, m := range months {
		out = append(out, "candle_points_"+m, "candle_trades_"+m)
	}
	slices.Sort(out)
	return out
}

// TestCandlePartitions: the partitions from the month 30 days back to two
// months ahead, made once however often and by however many at once; rows the
// default partition took for a month move into its partition when it is made.
func TestCandlePartitions(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := t.Context()
	made, err := s.EnsureCandlePartitions(ctx, day(2026, 7, 15))
	if err != nil {
		t.Fatal(err)
	}
	want := monthly("202606", "202607", "202608", "202609")
	slices.Sort(made)
	if !slices.Equal(made, want) {
		t.Errorf("made %v, want %v", made, want)
	}
	if made, err := s.EnsureCandlePartitions(ctx, day(2026, 7, 31)); err != nil || len(made) != 0 {
		t.Errorf("again: made %v, %v; want none", made, err)
	}

	// A point of a month with no partition yet lands in the default one.
	apply(t, s, &store.Batch{
		Prices: []store.Price{cprice("P1", 1, day(2031, 1, 5), store.Venues[0], quote(0.2, 0.3))},
		Trades: []store.Trade{ctrade("P1", "PT1", store.Venues[0], 0.25, 1, day(2031, 1, 5))},
	})
	fold(t, s)
	for _, table := range []string{"candle_points_default", "candle_trades_default"} {
		if n := countRows(t, pool, table); n != 1 {
			t.Fatalf("%s holds %d rows, want 1", table, n)
		}
	}
	before, err := s.Candles(ctx, "P1", "1h", "all", day(2031, 1, 5).Add(-time.Hour), day(2031, 1, 5).Add(time.Hour))
	if err != nil || len(before) != 1 {
		t.Fatalf("candles from the default partition: %v, %v", before, err)
	}
	// Several processes at once.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	mades := make([][]string, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mades[i], errs[i] = store.New(pool).EnsureCandlePartitions(ctx, day(2031, 1, 20))
		}()
	}
	wg.Wait()
	var all []string
	for i, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v", i, err)
		}
		all = append(all, mades[i]...)
	}
	slices.Sort(all)
	want = monthly("203012", "203101", "203102", "203103")
	if !slices.Equal(all, want) {
		t.Errorf("made together %v, want each of %v once", all, want)
	}
	for _, table := range []string{"candle_points", "candle_trades"} {
		if n := countRows(t, pool, table+"_default"); n != 0 {
			t.Errorf("%s_default holds %d rows after its month's partition was made, want 0", table, n)
		}
		if n := countRows(t, pool, table+"_203101"); n != 1 {
			t.Errorf("%s_203101 holds %d rows, want 1", table, n)
		}
	}
	after, err := s.Candles(ctx, "P1", "1h", "all", day(2031, 1, 5).Add(-time.Hour), day(2031, 1, 5).Add(time.Hour))
	if err != nil || show(after) != show(before) {
		t.Errorf("candles after the move: %v, %v; want %v", show(after), err, show(before))
	}
}

// TestCandleRetention: the sweep drops the 1m store's partitions of the
// months past the retention and deletes the default partitions' rows of
// those months, keeping the others; every coarse interval reads as before
// (the fold put every point and trade there), and 1m reads carry the value
// in force from what was dropped. Sweeping again, or twice at once, drops
// nothing twice.
func TestCandleRetention(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := t.Context()
	if _, err := s.EnsureCandlePartitions(ctx, day(2026, 2, 10)); err != nil { // 202601 … 202604
		t.Fatal(err)
	}
	m := candletest.New()
	a, b := store.Venues[0], store.Venues[1]
	applyBoth(t, s, m, []store.Price{
		cprice("Q1", 1, day(2025, 12, 30), a, quote(0.1, 0.2)), // no partition: the default one
		cprice("Q2", 1, day(2026, 1, 3), b, quote(0.3, 0.4)),
	}, nil)
	applyBoth(t, s, m, []store.Price{
		cprice("Q1", 2, day(2026, 1, 20), a, quote(0.15, 0.25), b, quote(0.16, 0.26)),
		cprice("Q2", 2, day(2026, 2, 2), b, quote(0.35, 0.45)),
	}, []store.Trade{ctrade("Q1", "QT1", a, 0.2, 2, day(2026, 1, 20)), ctrade("Q1", "QT2", b, 0.22, 1, day(2026, 1, 31).Add(11*time.Hour+59*time.Minute))})
	applyBoth(t, s, m, []store.Price{cprice("Q1", 3, day(2026, 3, 14), a, quote(0.5, 0.6))},
		[]store.Trade{ctrade("Q1", "QT3", a, 0.55, 1, day(2026, 3, 14))})
	fold(t, s)

	// 2026-03-15 minus 30 days is in February: January goes.
	now := day(2026, 3, 15)
	var wg sync.WaitGroup
	res := make([]store.CandleSweep, 2)
	errs := make([]error, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = store.New(pool).SweepCandles(ctx, now)
		}()
	}
	wg.Wait()
	var dropped []string
	for i := range res {
		if errs[i] != nil {
			t.Errorf("sweep %d: %v", i, errs[i])
		}
		dropped = append(dropped, res[i].Dropped...)
	}
	if res[0].Deleted+res[1].Deleted != 1 {
		t.Errorf("deleted %d + %d rows, want 1 (Dec 30's point, in the default partition)", res[0].Deleted, res[1].Deleted)
	}
	slices.Sort(dropped)
	if !slices.Equal(dropped, monthly("202601")) {
		t.Errorf("dropped %v, want %v once", dropped, monthly("202601"))
	}
	for _, table := range []string{"candle_points", "candle_trades"} {
		var want []string
		for _, m := range []string{"202602", "202603", "202604", "default"} {
			want = append(want, table+"_"+m)
		}
		if got := partitions(t, pool, table); !slices.Equal(got, want) {
			t.Errorf("partitions %v, want %v", got, want)
		}
	}
	if n := countRows(t, pool, "candle_points"); n != 2 {
		t.Errorf("candle_points holds %d rows, want 2 (Feb 2, Mar 14)", n)
	}
	if n := countRows(t, pool, "candle_trades"); n != 1 {
		t.Errorf("candle_trades holds %d rows, want 1 (Mar 14)", n)
	}
	if n := countRows(t, pool, "candles_1d"); n != 6 {
		t.Errorf("candles_1d holds %d rows, want 6 (Q1: Dec 30, Jan 20, Jan 31, Mar 14; Q2: Jan 3, Feb 2)", n)
	}
	res2, err := s.SweepCandles(ctx, now)
	if err != nil || res2.Deleted != 0 || len(res2.Dropped) != 0 {
		t.Errorf("sweeping again: %+v, %v; want nothing", res2, err)
	}

	// Coarse intervals read the same as before the move.
	from, to := day(2025, 12, 29), day(2026, 3, 20)
	for _, market := range []string{"Q1", "Q2"} {
		for _, interval := range []string{"1h", "4h", "1d"} {
			step, _ := store.CandleStep(interval)
			got, err := s.Candles(ctx, market, interval, "all", from, to)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := show(got), show(m.Candles(market, step, "all", from, to)); g != w {
				t.Errorf("%s %s after the sweep:\n got %.800s\nwant %.800s", market, interval, g, w)
			}
		}
	}
	// 1m from February on: Q2's value in force comes from dropped January.
	got, err := s.Candles(ctx, "Q2", "1m", "venue_b", day(2026, 2, 1), day(2026, 2, 1).Add(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Bid == nil || *got[0].Bid.Open != 0.3 {
		t.Errorf("Q2 1m at February's start: %s; want three candles at bid 0.3", show(got))
	}
}

// TestCandlesConcurrentWriters: two stores (two ingest processes) write at
// once, each the prices of some markets and the trades of the others, some
// trades in both, while two folders fold: no deadlock, nothing counted twice
// or lost.
func TestCandlesConcurrentWriters(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	ctx := t.Context()
	deadlocks := func() int64 {
		var n int64
		if _, err := pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	d0 := deadlocks()
	m := candletest.New()
	mine := [2][]string{{"W1", "W2", "W3"}, {"W4", "W5", "W6"}}
	const rounds = 40
	batches := [2][rounds]store.Batch{}
	for w := range 2 {
		for r := range rounds {
			b := &batches[w][r]
			for k, id := range mine[w] {
				b.Prices = append(b.Prices, cprice(id, int64(r+1), at(r, 10*k), store.Venues[k], quote(0.1+0.01*float64(r), 0.9)))
				b.Trades = append(b.Trades, ctrade(id, fmt.Sprintf("both-%s-%d", id, r), store.Venues[3], 0.6, 2, at(r, 30)))
			}
			for k, id := range mine[1-w] {
				b.Trades = append(b.Trades,
					ctrade(id, fmt.Sprintf("own-%s-%d", id, r), store.Venues[k], 0.5, 1, at(r, 20)),
					ctrade(id, fmt.Sprintf("both-%s-%d", id, r), store.Venues[3], 0.6, 2, at(r, 30)))
			}
		}
	}
	for r := range rounds {
		for w := range 2 {
			m.ApplyBatch(batches[w][r].Prices, batches[w][r].Trades)
		}
	}
	// Two folders run while the writers write.
	done := make(chan struct{})
	var folders sync.WaitGroup
	for range 2 {
		folders.Add(1)
		go func() {
			defer folders.Done()
			st := store.New(pool)
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := st.FoldCandles(ctx, time.Now()); err != nil {
					t.Errorf("fold: %v", err)
					return
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := store.New(pool)
			for r := range rounds {
				b := batches[w][r]
				b.Prices, b.Trades = slices.Clone(b.Prices), slices.Clone(b.Trades)
				if _, err := st.ApplyBatch(ctx, &b); err != nil {
					t.Errorf("writer %d round %d: %v", w, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	folders.Wait()
	compareCandles(t, s, m, append(mine[0], mine[1]...), cbase, at(rounds+1, 0))
	fold(t, s)
	compareCandles(t, s, m, append(mine[0], mine[1]...), cbase, at(rounds+1, 0))
	time.Sleep(1100 * time.Millisecond) // backends report their statistics at most once a second
	if d := deadlocks() - d0; d != 0 {
		t.Errorf("%d deadlocks while writing, want none", d)
	}
}

// TestReplicaReadsCandles: with the replica down, candles come from the
// primary.
func TestReplicaReadsCandles(t *testing.T) {
	t.Parallel()
	primary, _ := setup(t)
	apply(t, primary, &store.Batch{Prices: []store.Price{cprice("R1", 1, at(0, 0), store.Venues[0], quote(0.2, 0.3))}})
	var fell int
	r := &store.ReplicaReads{Replica: downStore(t), Primary: primary, OnFallback: func(error) { fell++ }}
	got, err := r.Candles(t.Context(), "R1", "1h", "all", cbase, at(60, 0))
	if err != nil || len(got) != 1 || got[0].Bid == nil || fell != 1 {
		t.Errorf("Candles through a down replica: %s, %v, %d fallbacks; want one candle from the primary", show(got), err, fell)
	}
}

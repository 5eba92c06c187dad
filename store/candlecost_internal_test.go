package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestCandleCost measures what candles cost ApplyBatch, and the two ways to
// serve coarser intervals: docs/benchmarks.md ("Candles storage") has the
// figures. It runs only with MD_CANDLE_COST=1: it takes a minute and its
// figures mean something only on a machine that is otherwise idle enough.
//
// Ingest: batches of 1,000 prices of distinct markets out of 5,000, two to
// four venues each (as mdbench's ingest world), applied through ApplyBatch's
// one-round-trip path on one connection, in rounds that alternate
//
//   - before: the statement ApplyBatch ran before candles (kept below);
//   - 1m: the candles as ingest writes them;
//   - 1m+5: also the five coarser tables, written in the same statement.
//
// and two clocks: "dense", every update of a market in the same minute (as
// mdbench's, whose ts advance a millisecond a version: each candle write
// updates a row), and "sparse", each version in a minute of its own (each
// inserts one). Figures per applied price: wall time, and CPU of the
// connection's Postgres backend (/proc).
//
// Read: Candles of 500 1h buckets of a market with a point every minute and a
// trade every fifth: rolled up from 30,000 1m rows, against the same data
// stored in the 1h table (500 rows).
func TestCandleCost(t *testing.T) {
	if os.Getenv("MD_CANDLE_COST") == "" {
		t.Skip("a measurement: set MD_CANDLE_COST=1 to run it")
	}
	ctx := t.Context()
	dsn := testenv.Database(t)
	if _, err := Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	pool, err := OpenSized(dsn, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool)
	for _, tbl := range []string{"candles_15m", "candles_4h"} {
		if _, err := pool.Exec(ctx, `CREATE TABLE `+tbl+` (LIKE candles_1h INCLUDING ALL)`); err != nil {
			t.Fatal(err)
		}
	}
	var pid int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	_ = newBatchStatements(append(slices.Clone(candleTargets),
		candleTarget{"candles_5m", "date_bin('5 minutes', ts, TIMESTAMPTZ '2000-01-01 00:00:00+00')"},
		candleTarget{"candles_15m", "date_bin('15 minutes', ts, TIMESTAMPTZ '2000-01-01 00:00:00+00')"},
		candleTarget{"candles_1h", "date_trunc('hour', ts, 'UTC')"},
		candleTarget{"candles_4h", "date_bin('4 hours', ts, TIMESTAMPTZ '2000-01-01 00:00:00+00')"},
		candleTarget{"candles_1d", "date_trunc('day', ts, 'UTC')"}))
	if _, err := pool.Exec(ctx, `CREATE TABLE candle_points (market_id text COLLATE "C" NOT NULL, ts timestamptz NOT NULL,
		version bigint NOT NULL, present int, all_bid float8, all_ask float8, a_bid float8, a_ask float8, b_bid float8,
		b_ask float8, c_bid float8, c_ask float8, d_bid float8, d_ask float8)`); err != nil {
		t.Fatal(err)
	}
	pointIdx := os.Getenv("MD_CANDLE_POINTS_INDEX") != ""
	if pointIdx {
		if _, err := pool.Exec(ctx, `CREATE INDEX ON candle_points (market_id, ts)`); err != nil {
			t.Fatal(err)
		}
	}
	points := newBatchStatements([]candleTarget{{"candle_points", ""}})
	pointsGo := newBatchStatements([]candleTarget{{"candle_points_go", ""}})
	modes := []struct {
		name  string
		apply func(*Batch) error
	}{
		{"before", func(b *Batch) error { return s.applyBefore(ctx, b) }},
		{"1m", func(b *Batch) error { _, err := s.ApplyBatch(ctx, b); return err }},
		{"points", func(b *Batch) error {
			s.stmts = points
			defer func() { s.stmts = defaultBatchStatements }()
			_, err := s.ApplyBatch(ctx, b)
			return err
		}},
		{"pts-go", func(b *Batch) error {
			s.stmts, goPoints = pointsGo, true
			defer func() { s.stmts, goPoints = defaultBatchStatements, false }()
			_, err := s.ApplyBatch(ctx, b)
			return err
		}},
	}
	const markets, batch, batches, rounds = 5000, 1000, 20, 6
	start := time.Now().UTC().Truncate(time.Hour)
	for _, clock := range []string{"dense", "sparse"} {
		wall := map[string][]float64{}
		cpu := map[string][]float64{}
		n := 0
		next := func() *Batch {
			b := &Batch{}
			for range batch {
				i, v := n%markets, int64(n/markets+1)
				n++
				ts := start.Add(time.Duration(v) * time.Millisecond)
				if clock == "sparse" {
					ts = start.Add(time.Duration(v) * time.Minute)
				}
				b.Prices = append(b.Prices, costPrice(clock, i, v, ts))
			}
			return b
		}
		for range markets / batch { // every market known and in the deps cache first
			if err := modes[1].apply(next()); err != nil {
				t.Fatal(err)
			}
		}
		// Modes take turns in blocks of batches, round after round, so the
		// machine's drift (it is shared) falls on each alike; a block is long
		// enough for /proc's 10 ms ticks.
		for r := range rounds {
			for _, m := range modes {
				c0, t0 := backendCPU(t, pid), time.Now()
				for range batches {
					if err := m.apply(next()); err != nil {
						t.Fatalf("%s: %v", m.name, err)
					}
				}
				el, c := time.Since(t0), backendCPU(t, pid)-c0
				if r == 0 {
					continue // warm-up
				}
				wall[m.name] = append(wall[m.name], float64(el.Microseconds())/(batch*batches))
				cpu[m.name] = append(cpu[m.name], c.Seconds()*1e6/(batch*batches))
			}
		}
		for _, m := range modes {
			w, c := median(wall[m.name]), median(cpu[m.name])
			t.Logf("ingest %-6s %-6s wall %6.1f µs/price (%.2f× before), Postgres CPU %6.1f µs/price (%.2f× before)",
				clock, m.name, w, w/median(wall["before"]), c, c/median(cpu["before"]))
		}
	}
	if os.Getenv("MD_CANDLE_SKIP_READS") == "" {
		costReads(t, s)
	}
}

// costPrice is market i's price at version v, as mdbench's ingest world
// makes them: two to four venues. Each clock has markets of its own.
func costPrice(clock string, i int, v int64, ts time.Time) Price {
	venues := 2 + (i+int(v))%3
	quotes := make(map[string]Quote, venues)
	for k := range venues {
		mid := 0.5 + 0.4*math.Sin(float64(i)*0.7+float64(v)*0.13+float64(k))
		bid, ask, last := math.Round((mid-0.01)*100)/100, math.Round((mid+0.01)*100)/100, math.Round(mid*100)/100
		quotes[Venues[k]] = Quote{Bid: &bid, Ask: &ask, Last: &last, Volume24h: float64(100*(i%97) + int(v))}
	}
	return Price{MarketID: fmt.Sprintf("%s-%05d", clock, i), Version: v, TS: ts, Quotes: quotes}
}

// costReads times the 500-candle 1h read both ways: market "read-0" has its
// 1m rows (among four other markets' rows of the same minutes, as a table
// written in time order holds them), "read-h" the same data in the 1h table.
func costReads(t *testing.T, s *Store) {
	ctx := t.Context()
	end := time.Now().UTC().Truncate(time.Hour)
	start := end.Add(-500 * time.Hour)
	if _, err := s.EnsureCandlePartitions(ctx, end); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureCandlePartitions(ctx, start); err != nil {
		t.Fatal(err)
	}
	var target []candleRow
	var chunk []candleRow
	flush := func(table string) {
		if len(chunk) == 0 {
			return
		}
		if _, err := s.pool.Exec(ctx, coarseUpsertSQL(table), candleRowArgs(chunk)...); err != nil {
			t.Fatal(err)
		}
		chunk = chunk[:0]
	}
	for m, i := start, 0; m.Before(end); m, i = m.Add(time.Minute), i+1 {
		for k := range 5 {
			r := costRow(fmt.Sprintf("read-%d", k), m, i+k)
			chunk = append(chunk, r)
			if k == 0 {
				target = append(target, r)
			}
		}
		if len(chunk) >= 5000 {
			flush("candles_1m")
		}
	}
	flush("candles_1m")
	hours := foldCandles(target, time.Hour)
	for i := range hours {
		hours[i].marketID = "read-h"
	}
	chunk = hours
	flush("candles_1h")
	if _, err := s.pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	times := map[string][]float64{}
	for range 15 {
		for _, id := range []string{"read-0", "read-h"} {
			t0 := time.Now()
			cs, err := s.Candles(ctx, id, "1h", "all", start, end)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 500 || cs[499].Trade == nil {
				t.Fatalf("%s: %d candles", id, len(cs))
			}
			times[id] = append(times[id], float64(time.Since(t0).Microseconds())/1000)
		}
	}
	t.Logf("read 500 × 1h: rolled up from 30,000 1m rows %.1f ms, from 500 1h rows %.1f ms (medians of 15)",
		median(times["read-0"]), median(times["read-h"]))
}

// costRow is a 1m row with a point in every series but venue_d and, every
// fifth minute, a trade on venue_b.
func costRow(id string, m time.Time, i int) candleRow {
	r := candleRow{marketID: id, bucket: m}
	for k := range 4 {
		mid := 0.5 + 0.4*math.Sin(float64(i)*0.01+float64(k))
		bid, ask := math.Round((mid-0.01)*100)/100, math.Round((mid+0.01)*100)/100
		p := &candlePoint{ts: m.Add(30 * time.Second), version: int64(i + 1), bid: &bid, ask: &ask}
		st := &seriesState{first: p, last: p, bidHigh: &bid, bidLow: &bid, askHigh: &ask, askLow: &ask}
		if i%5 == 0 && (k == 0 || k == 2) {
			tr := &candleTrade{ts: m.Add(40 * time.Second), id: fmt.Sprintf("%s-%d", id, i), price: mid}
			st.trades, st.volume, st.open, st.close, st.tradeHigh, st.tradeLow = 1, 10, tr, tr, mid, mid
		}
		r.series[k] = st
	}
	return r
}

// backendCPU is the CPU a Postgres backend has used (utime + stime).
func backendCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatalf("read the backend's CPU (Postgres must run on this machine): %v", err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// beforeDocsSQL is the statement ApplyBatch ran for a prices-only batch
// before candles (its columns in the order scanPriceDocs now reads them).
const beforeDocsSQL = `
	WITH u AS (
	    SELECT *
	    FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::text[], $5::bigint[])
	        AS u(market_id, version, ts, quotes, cached)
	), up AS (
	    INSERT INTO prices AS t (market_id, version, ts, quotes)
	    SELECT u.market_id, u.version, u.ts, u.quotes::json
	    FROM u
	    ON CONFLICT (market_id) DO UPDATE SET
	        version = EXCLUDED.version,
	        ts = EXCLUDED.ts,
	        quotes = EXCLUDED.quotes,
	        ingested_at = now()
	    WHERE t.version < EXCLUDED.version
	    RETURNING t.market_id
	)
	SELECT u.market_id, d.rev, d.deps, '',
	       ` + marketColumns + `, ` + eventColumns + `,
	       up.market_id IS NOT NULL, p.market_id, p.version, p.ts, p.quotes
	FROM u
	JOIN doc_revs d ON d.doc = 'm:' || u.market_id
	LEFT JOIN up ON up.market_id = u.market_id
	LEFT JOIN markets m ON m.universal_id = CASE WHEN d.deps <> u.cached THEN u.market_id END
	LEFT JOIN events e ON e.universal_id = m.event_id
	LEFT JOIN prices p ON p.market_id = CASE WHEN up.market_id IS NULL THEN u.market_id END`

// applyBefore is ApplyBatch's prices-only path as it was before candles.
func (s *Store) applyBefore(ctx context.Context, b *Batch) error {
	b.Dedup()
	n := len(b.Prices)
	ids, docs, quotes := make([]string, n), make([]string, n), make([]string, n)
	versions, ts, stamps := make([]int64, n), make([]time.Time, n), make([]int64, n)
	for i, p := range b.Prices {
		qs, err := json.Marshal(p.Quotes)
		if err != nil {
			return err
		}
		ids[i], docs[i], versions[i], ts[i], quotes[i] = p.MarketID, "m:"+p.MarketID, p.Version, p.TS, string(qs)
	}
	cached := s.deps.get(ids)
	for i, e := range cached {
		stamps[i] = e.deps
	}
	q := &pgx.Batch{}
	q.Queue(lockDocsSQL, docs, make([]bool, n))
	q.Queue(beforeDocsSQL, ids, versions, ts, quotes, stamps)
	br := s.pool.SendBatch(ctx, q)
	_, err := br.Exec()
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			_, err = s.scanPriceDocs(rows, b.Prices, cached, map[string]bool{})
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

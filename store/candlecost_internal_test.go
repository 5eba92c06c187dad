package store

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestCandleCost measures what candles cost ApplyBatch and their fold, and
// what the 500-candle 1h read and the 5,000-candle 1m read take:
// docs/benchmarks.md ("Candles storage") has the figures. It runs only with
// MD_CANDLE_COST=1: it takes a minute and its figures mean something only on
// a machine that is otherwise idle enough.
//
// Ingest: batches of 1,000 prices of distinct markets out of 5,000, two to
// four venues each (as mdbench's ingest world), applied through ApplyBatch's
// one-round-trip path on one connection, in rounds that alternate
//
//   - before: the batch statement without candles;
//   - candles: as ingest writes them (the points queued);
//
// and, after each block of candles, FoldCandles and the queues' vacuum on
// the same connection (fold), and two clocks: "dense", every update of a
// market in the same minute of this hour (as mdbench's, whose ts advance a
// millisecond a version; no bucket closes), and "sparse", each version in a
// minute of its own from three hours back (the fold closes each 5m bucket,
// five points of every market, once it is full). Figures per applied price:
// wall time, and CPU of the connection's Postgres backend (/proc).
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
	if _, err := s.EnsureCandlePartitions(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	before := newBatchStatements(false)
	modes := []struct {
		name  string
		apply func(*Batch) error
	}{
		{"before", func(b *Batch) error {
			s.stmts = before
			defer func() { s.stmts = defaultBatchStatements }()
			_, err := s.ApplyBatch(ctx, b)
			return err
		}},
		{"candles", func(b *Batch) error { _, err := s.ApplyBatch(ctx, b); return err }},
	}
	const markets, batch, batches, rounds = 5000, 1000, 20, 6
	// Now, not the hour: a dense point lands in a bucket that does not close
	// while the test runs (one that did would make every later point late).
	start := time.Now().UTC()
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
					// Three hours back: the fold closes the 5m buckets as
					// they fill (each holds 5 points of every market).
					ts = start.Truncate(time.Hour).Add(-3*time.Hour + time.Duration(v)*time.Minute)
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
				if m.name == "candles" {
					c0, t0 := backendCPU(t, pid), time.Now()
					if _, err := s.FoldCandles(ctx, time.Now()); err != nil {
						t.Fatal(err)
					}
					if err := s.VacuumCandleQueues(ctx); err != nil { // as ingest does after each fold
						t.Fatal(err)
					}
					if r > 0 {
						wall["fold"] = append(wall["fold"], float64(time.Since(t0).Microseconds())/(batch*batches))
						cpu["fold"] = append(cpu["fold"], (backendCPU(t, pid)-c0).Seconds()*1e6/(batch*batches))
					}
				}
				if r == 0 {
					continue // warm-up
				}
				wall[m.name] = append(wall[m.name], float64(el.Microseconds())/(batch*batches))
				cpu[m.name] = append(cpu[m.name], c.Seconds()*1e6/(batch*batches))
			}
		}
		for _, m := range []string{"before", "candles", "fold"} {
			w, c := median(wall[m]), median(cpu[m])
			t.Logf("ingest %-6s %-7s wall %6.1f µs/price (%.2f× before), Postgres CPU %6.1f µs/price (%.2f× before)",
				clock, m, w, w/median(wall["before"]), c, c/median(cpu["before"]))
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

// costReads times the 500-candle 1h read and the 5,000-candle 1m read of
// market "read-0", which has a point every minute and a trade every fifth
// for 500 hours, among four other markets' of the same minutes, queued and
// folded as ingest does.
func costReads(t *testing.T, s *Store) {
	ctx := t.Context()
	end := time.Now().UTC().Truncate(time.Hour)
	start := end.Add(-500 * time.Hour)
	for m := start; m.Before(end); m = m.AddDate(0, 0, 7) {
		if _, err := s.EnsureCandlePartitions(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for m, i := start, 0; m.Before(end); m, i = m.Add(time.Minute), i+1 {
		for k := range 5 {
			id := fmt.Sprintf("read-%d", k)
			mid := 0.5 + 0.4*math.Sin(float64(i)*0.01+float64(k))
			bid, ask := math.Round((mid-0.01)*100)/100, math.Round((mid+0.01)*100)/100
			if _, err := s.pool.Exec(ctx, `INSERT INTO candle_points_new VALUES ($1, $2, $3, 7, $4, $5, $4, $5, $4, $5, $4, $5, NULL, NULL)`,
				id, m.Add(30*time.Second), i+1, bid, ask); err != nil {
				t.Fatal(err)
			}
			if i%5 == 0 {
				if _, err := s.pool.Exec(ctx, `INSERT INTO candle_trades_new VALUES ($1, $2, $3, 2, $4, 10, true)`,
					id, m.Add(40*time.Second), fmt.Sprintf("%s-%d", id, i), mid); err != nil {
					t.Fatal(err)
				}
			}
		}
		if i%2000 == 0 {
			if _, err := s.FoldCandles(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.FoldCandles(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	times := map[string][]float64{}
	for range 15 {
		for _, r := range []struct {
			interval string
			from     time.Time
			n        int
		}{{"1h", start, 500}, {"1m", end.Add(-5000 * time.Minute), 5000}} {
			t0 := time.Now()
			cs, err := s.Candles(ctx, "read-0", r.interval, "all", r.from, end)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != r.n || cs[r.n-1].Bid == nil {
				t.Fatalf("%s: %d candles", r.interval, len(cs))
			}
			times[r.interval] = append(times[r.interval], float64(time.Since(t0).Microseconds())/1000)
		}
	}
	t.Logf("read: 500 × 1h %.1f ms, 5,000 × 1m %.1f ms (medians of 15)", median(times["1h"]), median(times["1m"]))
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

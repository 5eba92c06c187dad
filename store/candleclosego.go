package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Closing 5m buckets in Go (closeBuckets): the bucket's points are read
// once, in the order the (ts) index gives, and folded into one compact state
// per market and bucket (pointAcc: values, no pointers, so the collector
// never walks them); the trades, few, through seriesState. The rows are
// then copied into a temporary table and merged into candles_5m in one
// statement (through unnest parameters, as late rows are written, they took
// 39 µs a row).
//
// In SQL the aggregate took ten min/max over ARRAY[…] a point, 7.6 µs a
// point on this project's test machine (docs/benchmarks.md), most of the
// close; here Postgres only reads the points.

// pointAcc is one series' points in one bucket: the first and last by (ts,
// version) and the extremes. has* say which values are set (a side may be
// NULL in every point).
type pointAcc struct {
	n                  int32
	firstTS, lastTS    int64 // µs since the epoch
	firstVer, lastVer  int64
	firstBid, firstAsk float64
	lastBid, lastAsk   float64
	bidHigh, bidLow    float64
	askHigh, askLow    float64
	nulls              uint8 // firstBid, firstAsk, lastBid, lastAsk absent: bits 0–3
	hasBid, hasAsk     bool
}

const (
	nullFirstBid = 1 << iota
	nullFirstAsk
	nullLastBid
	nullLastAsk
)

func (a *pointAcc) add(us, version int64, bid, ask *float64) {
	nb, na := uint8(0), uint8(0)
	var b, k float64
	if bid == nil {
		nb = 1
	} else {
		b = *bid
	}
	if ask == nil {
		na = 1
	} else {
		k = *ask
	}
	if a.n == 0 || us < a.firstTS || us == a.firstTS && version < a.firstVer {
		a.firstTS, a.firstVer, a.firstBid, a.firstAsk = us, version, b, k
		a.nulls = a.nulls&^(nullFirstBid|nullFirstAsk) | nb*nullFirstBid | na*nullFirstAsk
	}
	if a.n == 0 || us > a.lastTS || us == a.lastTS && version > a.lastVer {
		a.lastTS, a.lastVer, a.lastBid, a.lastAsk = us, version, b, k
		a.nulls = a.nulls&^(nullLastBid|nullLastAsk) | nb*nullLastBid | na*nullLastAsk
	}
	if bid != nil {
		if !a.hasBid {
			a.bidHigh, a.bidLow, a.hasBid = b, b, true
		} else {
			a.bidHigh, a.bidLow = math.Max(a.bidHigh, b), math.Min(a.bidLow, b)
		}
	}
	if ask != nil {
		if !a.hasAsk {
			a.askHigh, a.askLow, a.hasAsk = k, k, true
		} else {
			a.askHigh, a.askLow = math.Max(a.askHigh, k), math.Min(a.askLow, k)
		}
	}
	a.n++
}

// state is the points as a series state (nil: none).
func (a *pointAcc) state() *seriesState {
	if a.n == 0 {
		return nil
	}
	val := func(v float64, null bool) *float64 {
		if null {
			return nil
		}
		return &v
	}
	s := &seriesState{
		first: &candlePoint{ts: time.UnixMicro(a.firstTS).UTC(), version: a.firstVer,
			bid: val(a.firstBid, a.nulls&nullFirstBid != 0), ask: val(a.firstAsk, a.nulls&nullFirstAsk != 0)},
		last: &candlePoint{ts: time.UnixMicro(a.lastTS).UTC(), version: a.lastVer,
			bid: val(a.lastBid, a.nulls&nullLastBid != 0), ask: val(a.lastAsk, a.nulls&nullLastAsk != 0)},
	}
	if a.hasBid {
		s.bidHigh, s.bidLow = val(a.bidHigh, false), val(a.bidLow, false)
	}
	if a.hasAsk {
		s.askHigh, s.askLow = val(a.askHigh, false), val(a.askLow, false)
	}
	return s
}

// closeAcc is a market's bucket being closed.
type closeAcc struct {
	marketID string
	bucket   time.Time
	points   [len(CandleSeries)]pointAcc
	trades   [len(CandleSeries)]*seriesState
}

// closeBuckets writes the 5m rows of the buckets in [from, to) from the 1m
// store, one a market and bucket with data, merging into rows already there
// (none unless a bucket was closed before, which the fold never does;
// merging keeps it safe).
func closeBuckets(ctx context.Context, tx pgx.Tx, from, to time.Time) error {
	type key struct {
		id     string
		bucket int64
	}
	at := map[key]int32{}
	var accs []closeAcc
	acc := func(id string, ts time.Time) *closeAcc {
		b := ts.Truncate(closeStep)
		k := key{id, b.UnixMicro()}
		i, ok := at[k]
		if !ok {
			i = int32(len(accs))
			at[k] = i
			accs = append(accs, closeAcc{marketID: strings.Clone(id), bucket: b.UTC()})
		}
		return &accs[i]
	}
	var p rawPoint
	dest := []any{&p.marketID, &p.ts, &p.version, &p.present}
	for i := range p.vals {
		dest = append(dest, &p.vals[i])
	}
	rows, err := tx.Query(ctx, `SELECT market_id, ts, version, present, all_bid, all_ask, a_bid, a_ask,
		b_bid, b_ask, c_bid, c_ask, d_bid, d_ask FROM candle_points WHERE ts >= $1 AND ts < $2`, from, to)
	if err != nil {
		return fmt.Errorf("read the points: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, dest, func() error {
		a, us := acc(p.marketID, p.ts), p.ts.UnixMicro()
		for k := range a.points {
			if k > 0 && p.present&int32(presentBit(k-1)) == 0 {
				continue
			}
			a.points[k].add(us, p.version, p.vals[2*k], p.vals[2*k+1])
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read the points: %w", err)
	}
	var t rawTrade
	rows, err = tx.Query(ctx, `SELECT * FROM candle_trades WHERE ts >= $1 AND ts < $2`, from, to)
	if err != nil {
		return fmt.Errorf("read the trades: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, t.dest(), func() error {
		a := acc(t.marketID, t.ts)
		tr := t
		tr.ts = tr.ts.UTC()
		for k := range a.trades {
			addState(&a.trades[k], tr.state(k))
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read the trades: %w", err)
	}
	slices.SortFunc(accs, func(a, b closeAcc) int {
		return cmp.Or(strings.Compare(a.marketID, b.marketID), a.bucket.Compare(b.bucket))
	})
	if len(accs) == 0 {
		return nil
	}
	// The rows go to a temporary table by COPY, then into candles_5m in one
	// statement that merges (as closeUpsertSQL says).
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS candles_5m_closing
		(LIKE candles_5m) ON COMMIT DELETE ROWS`); err != nil {
		return fmt.Errorf("make the closing table: %w", err)
	}
	cols := append([]string{"market_id", "bucket"}, candleColumnsAll...)
	var vals []any
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"candles_5m_closing"}, cols, pgx.CopyFromSlice(len(accs), func(i int) ([]any, error) {
		a := &accs[i]
		vals = append(vals[:0], a.marketID, a.bucket)
		for k := range a.points {
			st := a.points[k].state()
			addState(&st, a.trades[k])
			vals = appendSeriesValues(vals, st)
		}
		return vals, nil
	})); err != nil {
		return fmt.Errorf("copy %d 5m rows: %w", len(accs), err)
	}
	if _, err := tx.Exec(ctx, closeUpsertSQL); err != nil {
		return fmt.Errorf("write %d 5m rows: %w", len(accs), err)
	}
	return nil
}

// closeUpsertSQL merges the closing table's rows into candles_5m.
var closeUpsertSQL = candleUpsert("candles_5m", candleColumnsAll,
	append(allSeries(candlePointMerge), allSeries(candleTradeMerge)...),
	"SELECT market_id, bucket, "+strings.Join(candleColumnsAll, ", ")+" FROM candles_5m_closing")

// appendSeriesValues appends series state s's columns (candleColumns order;
// all NULL for nil), as candleRowArgs lays them out for a row.
func appendSeriesValues(dst []any, s *seriesState) []any {
	var first, last [4]any
	if s == nil {
		for range len(candleColumnTypes) {
			dst = append(dst, nil)
		}
		return dst
	}
	if s.first != nil {
		first = [4]any{s.first.ts, s.first.version, s.first.bid, s.first.ask}
		last = [4]any{s.last.ts, s.last.version, s.last.bid, s.last.ask}
	}
	dst = append(dst, first[:]...)
	dst = append(dst, last[:]...)
	dst = append(dst, s.bidHigh, s.bidLow, s.askHigh, s.askLow)
	if s.trades == 0 {
		return append(dst, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil)
	}
	return append(dst, int32(s.trades), s.volume,
		s.open.ts, s.open.id, s.open.price, s.close.ts, s.close.id, s.close.price,
		s.tradeHigh, s.tradeLow)
}

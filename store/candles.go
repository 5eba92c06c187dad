package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Candle is one bucket of a market's series (contract §3 "Candle").
type Candle struct {
	// Start is the bucket's start, UTC, a multiple of its interval since
	// 00:00 UTC.
	Start time.Time `json:"start"`
	// Trades counts the bucket's trades; Volume sums their sizes.
	Trades int64   `json:"trades"`
	Volume float64 `json:"volume"`
	// Trade is the open, high, low and close of the trade prices; nil when
	// the bucket has no trade.
	Trade *OHLC `json:"trade"`
	// Bid and Ask are the best bid and ask over the bucket: Open is the
	// value in force when it starts (its first point's when none was
	// before), High and Low include it, Close is the value in force when it
	// ends; a bucket with no point repeats the value in force. Nil before the
	// series' first price.
	Bid *OHLC `json:"bid"`
	Ask *OHLC `json:"ask"`
}

// OHLC is an open, high, low and close. A nil field of a bid or ask is a
// side no counted venue quoted (no value in force); a trade's are never nil.
type OHLC struct {
	Open  *float64 `json:"open"`
	High  *float64 `json:"high"`
	Low   *float64 `json:"low"`
	Close *float64 `json:"close"`
}

// MaxCandles is the most candles one read returns.
const MaxCandles = 5000

// CandleIntervals are the candle intervals, shortest first.
var CandleIntervals = [...]string{"1m", "5m", "15m", "1h", "4h", "1d"}

var candleSteps = map[string]time.Duration{
	"1m": time.Minute, "5m": 5 * time.Minute, "15m": 15 * time.Minute,
	"1h": time.Hour, "4h": 4 * time.Hour, "1d": 24 * time.Hour,
}

// CandleStep returns interval's length; false when it is not one of
// CandleIntervals.
func CandleStep(interval string) (time.Duration, bool) {
	d, ok := candleSteps[interval]
	return d, ok
}

// CandleBuckets returns the start of the bucket of step that holds from and
// how many buckets of step start in [that start, to). Every step divides a
// day, and Go's time counts days of 86,400 s from a midnight UTC, so
// truncating to it aligns on minutes since 00:00 UTC.
func CandleBuckets(step time.Duration, from, to time.Time) (time.Time, int) {
	start := from.UTC().Truncate(step)
	if !to.After(start) {
		return start, 0
	}
	return start, int((to.Sub(start) + step - 1) / step)
}

// candleLayers are the coarse rows an interval's buckets are read from
// (each a table and which of its rows; with the 1m store's rows from the
// fold's mark on and the queues'): the rows of the finest table each step
// divides, coarser ones where the fold rolled them up (candle_fold: 1h rows
// before hours, 1d rows before days; the 5m rows from hours on are those of
// the hour not rolled up yet). A 1m read takes none: its range comes from the
// 1m store and the queues.
var candleLayers = func() map[string][]string {
	const (
		hours = `COALESCE((SELECT hours FROM candle_fold), '-infinity')`
		days  = `COALESCE((SELECT days FROM candle_fold), '-infinity')`
	)
	fives := []string{`candles_5m WHERE true`}
	hourly := []string{`candles_1h WHERE bucket < ` + hours, `candles_5m WHERE bucket >= ` + hours}
	daily := []string{`candles_1d WHERE bucket < ` + days,
		`candles_1h WHERE bucket >= ` + days + ` AND bucket < ` + hours, `candles_5m WHERE bucket >= ` + hours}
	return map[string][]string{"1m": nil, "5m": fives, "15m": fives, "1h": hourly, "4h": hourly, "1d": daily}
}()

// candleBefore is the coarse table that tells what came before a read's
// range (the value in force, whether any data came): candles_5m holds all
// of it before the fold's mark.
const candleBefore, candleBeforeStep = "candles_5m", 5 * time.Minute

// Candles reads a market's candles of interval for series ("all" or a
// venue) in the buckets that start in [the bucket of from, to): from the
// first bucket that holds any data of the series (the bucket of from when
// some came before it) up to to, none skipped; none when the series has no
// data before to. Intervals and series outside CandleIntervals and
// CandleSeries, and ranges of more than MaxCandles, are refused. All its
// statements see one snapshot (a repeatable-read transaction): a fold
// moving rows from the queues meanwhile cannot count a row twice or never.
func (s *Store) Candles(ctx context.Context, marketID, interval, series string, from, to time.Time) ([]Candle, error) {
	step, ok := CandleStep(interval)
	if !ok {
		return nil, fmt.Errorf("store: candles of market %s: unknown interval %q", marketID, interval)
	}
	k := candleSeriesIndex(series)
	if k < 0 {
		return nil, fmt.Errorf("store: candles of market %s: unknown series %q", marketID, series)
	}
	start, n := CandleBuckets(step, from, to)
	if n > MaxCandles {
		return nil, fmt.Errorf("store: candles of market %s: %d candles of %s from %s to %s, more than %d",
			marketID, n, interval, from.Format(time.RFC3339), to.Format(time.RFC3339), MaxCandles)
	}
	if n == 0 {
		return []Candle{}, nil
	}
	end := start.Add(time.Duration(n) * step)
	stmts := candleReads[interval+" "+series]
	states := make([]*seriesState, n)
	add := func(ts time.Time, st *seriesState) {
		if i := int(ts.Sub(start) / step); st != nil && ts.Compare(start) >= 0 && i < n {
			addState(&states[i], st)
		}
	}
	var inForce *candlePoint
	var earlier bool
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := &pgx.Batch{}
		if stmts.coarse != "" {
			q.Queue(stmts.coarse, marketID, start, end)
		}
		q.Queue(stmts.points, marketID, start, end)
		q.Queue(stmts.trades, marketID, start, end)
		q.Queue(stmts.inForce, marketID, start, start.Add(-candleBeforeStep))
		q.Queue(stmts.anyBefore, marketID, start, start.Add(-candleBeforeStep))
		br := tx.SendBatch(ctx, q)
		defer func() { _ = br.Close() }() // closed below; this one covers the early returns
		if stmts.coarse != "" {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			var bucket time.Time
			var sc seriesScan
			if _, err := pgx.ForEachRow(rows, append([]any{&bucket}, sc.dest()...), func() error {
				add(bucket, sc.state())
				return nil
			}); err != nil {
				return err
			}
		}
		var p rawPoint
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, []any{&p.ts, &p.version, &p.present, &p.vals[2*k], &p.vals[2*k+1]}, func() error {
			q := p
			q.ts, q.vals = p.ts.UTC(), cloneVals(p.vals)
			add(q.ts, q.state(k))
			return nil
		}); err != nil {
			return err
		}
		var t rawTrade
		if rows, err = br.Query(); err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, t.dest(), func() error {
			u := t
			u.ts = t.ts.UTC()
			add(u.ts, u.state(k))
			return nil
		}); err != nil {
			return err
		}
		var f candlePoint
		err = br.QueryRow().Scan(&f.ts, &f.version, &f.bid, &f.ask)
		switch {
		case err == nil:
			f.ts = f.ts.UTC()
			inForce, earlier = &f, true
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		var found bool
		if err := br.QueryRow().Scan(&found); err != nil {
			return err
		}
		earlier = earlier || found
		return br.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("store: candles of market %s (%s, %s): %w", marketID, interval, series, err)
	}
	return walkCandles(states, start, step, inForce, earlier), nil
}

// candleRead are the statements of one interval and series, each of the
// market $1 and the range [$2, $3) (inForce and anyBefore: before $2, and
// coarse buckets that end by $2, which start by $3): the coarse rows in the
// range; the points and trades in the range (the queues', and the 1m
// store's: all for 1m, from the fold's mark on for the coarse intervals);
// the value in force at its start (the latest point before it); whether any
// data came before it.
type candleRead struct {
	coarse, points, trades, inForce, anyBefore string
}

// candleReads are the statements by interval and series ("1h all").
var candleReads = func() map[string]candleRead {
	out := map[string]candleRead{}
	for _, interval := range CandleIntervals {
		for k, s := range CandleSeries {
			out[interval+" "+s] = buildCandleRead(candleLayers[interval], k, s)
		}
	}
	return out
}()

// queuedBatchPoints are the queued batches' points of market $1, as rows
// of candle_points (a FROM item): the batches that hold the market are
// found by their market_id array before any is unnested (unnesting every
// queued batch to filter afterwards, as the view candle_point_batch_rows
// would, took 20–33 ms for 10,000 queued points against 1.3 ms; review of
// 2026-11-28).
const queuedBatchPoints = `(SELECT p.*
		FROM candle_point_batches b
		CROSS JOIN LATERAL unnest(b.market_id, b.ts, b.version, b.present, b.all_bid, b.all_ask,
		                          b.a_bid, b.a_ask, b.b_bid, b.b_ask, b.c_bid, b.c_ask, b.d_bid, b.d_ask)
		    AS p(market_id, ts, version, present, all_bid, all_ask, a_bid, a_ask, b_bid, b_ask, c_bid, c_ask, d_bid, d_ask)
		WHERE $1 = ANY(b.market_id)) q`

// buildCandleRead writes the statements of series s (at k in CandleSeries)
// read from the coarse rows of layers, or from the 1m store (no layers).
func buildCandleRead(layers []string, k int, s string) candleRead {
	fine := len(layers) == 0
	col := "all"
	pointCond, tradeCond := "", " AND counts"
	if k > 0 {
		col = string(rune('a' + k - 1))
		pointCond = fmt.Sprintf(" AND present & %d <> 0", presentBit(k-1))
		tradeCond = fmt.Sprintf(" AND venue = %d", k)
	}
	has := fmt.Sprintf("(%[1]s_last_ts IS NOT NULL OR %[1]s_trades IS NOT NULL)", s)
	var r candleRead
	var coarse []string
	for _, l := range layers {
		coarse = append(coarse, `SELECT bucket, `+strings.Join(candleColumns(s), ", ")+` FROM `+l+`
		AND market_id = $1 AND bucket >= $2 AND bucket < $3 AND `+has)
	}
	r.coarse = strings.Join(coarse, "\n\t\tUNION ALL\n\t\t") // none for 1m
	// The 1m store's rows: all of them for 1m; for the coarse intervals,
	// those from the fold's mark on (before it, the coarse table has them).
	store := ""
	if !fine {
		store = ` AND ts >= COALESCE((SELECT closed FROM candle_fold), '-infinity')`
	}
	var points, trades, inForce, any []string
	// The sources: the 1m store, the queues' rows, the queued batches'
	// points (migration 009; trades are queued as rows only).
	for _, f := range []struct{ points, trades, cond string }{
		{"candle_points", "candle_trades", store},
		{"candle_points_new", "candle_trades_new", ""},
		{queuedBatchPoints, "", ""},
	} {
		pc, tc := f.cond+pointCond, f.cond+tradeCond
		points = append(points, `SELECT ts, version, present, `+col+`_bid, `+col+`_ask FROM `+f.points+`
		WHERE market_id = $1 AND ts >= $2 AND ts < $3`+pc)
		inForce = append(inForce, `(SELECT ts, version, `+col+`_bid, `+col+`_ask FROM `+f.points+`
		 WHERE market_id = $1 AND ts < $2`+pc+` ORDER BY ts DESC, version DESC LIMIT 1)`)
		any = append(any, `EXISTS (SELECT 1 FROM `+f.points+` WHERE market_id = $1 AND ts < $2`+pc+`)`)
		if f.trades != "" {
			trades = append(trades, `SELECT * FROM `+f.trades+`
		WHERE market_id = $1 AND ts >= $2 AND ts < $3`+tc)
			any = append(any, `EXISTS (SELECT 1 FROM `+f.trades+` WHERE market_id = $1 AND ts < $2`+tc+`)`)
		}
	}
	last := fmt.Sprintf("%[1]s_last_ts, %[1]s_last_version, %[1]s_last_bid, %[1]s_last_ask", s)
	inForce = append(inForce, `(SELECT `+last+` FROM `+candleBefore+`
		 WHERE market_id = $1 AND bucket <= $3 AND `+s+`_last_ts IS NOT NULL ORDER BY bucket DESC LIMIT 1)`)
	any = append(any, `EXISTS (SELECT 1 FROM `+candleBefore+` WHERE market_id = $1 AND bucket <= $3 AND `+has+`)`)
	r.points = strings.Join(points, "\n\t\tUNION ALL\n\t\t")
	r.trades = strings.Join(trades, "\n\t\tUNION ALL\n\t\t")
	r.inForce = `SELECT * FROM (` + strings.Join(inForce, "\n\t\tUNION ALL\n\t\t") + `) p ORDER BY 1 DESC, 2 DESC LIMIT 1`
	r.anyBefore = `SELECT ` + strings.Join(any, "\n\t\tOR ")
	return r
}

// walkCandles turns the buckets' states into candles: from the first bucket
// (0 when data came earlier, else the first that holds any), carrying the
// value in force through buckets with no point.
func walkCandles(states []*seriesState, start time.Time, step time.Duration, inForce *candlePoint, earlier bool) []Candle {
	first := 0
	if !earlier {
		for first < len(states) && states[first] == nil {
			first++
		}
	}
	out := make([]Candle, 0, len(states)-first)
	for i := first; i < len(states); i++ {
		c := Candle{Start: start.Add(time.Duration(i) * step)}
		st := states[i]
		if st != nil && st.first != nil {
			open := inForce
			if open == nil {
				open = st.first
			}
			c.Bid = quoteOHLC(open.bid, st.bidHigh, st.bidLow, st.last.bid)
			c.Ask = quoteOHLC(open.ask, st.askHigh, st.askLow, st.last.ask)
			inForce = st.last
		} else if inForce != nil {
			c.Bid = quoteOHLC(inForce.bid, nil, nil, inForce.bid)
			c.Ask = quoteOHLC(inForce.ask, nil, nil, inForce.ask)
		}
		if st != nil && st.trades > 0 {
			c.Trades, c.Volume = st.trades, st.volume
			c.Trade = &OHLC{Open: price(st.open.price), High: price(st.tradeHigh), Low: price(st.tradeLow), Close: price(st.close.price)}
		}
		out = append(out, c)
	}
	return out
}

// quoteOHLC is a side's candle: high and low over the bucket's points and the
// open.
func quoteOHLC(open, high, low, close *float64) *OHLC {
	high, low = maxOf(open, high), minOf(open, low)
	return &OHLC{Open: pricePtr(open), High: pricePtr(high), Low: pricePtr(low), Close: pricePtr(close)}
}

// price rounds a price to the venues' precision (1e-9): an inverted price,
// 1 − x in float64, would otherwise print as 0.30000000000000004.
func price(v float64) *float64 {
	r := math.Round(v*1e9) / 1e9
	return &r
}

func pricePtr(v *float64) *float64 {
	if v == nil {
		return nil
	}
	return price(*v)
}

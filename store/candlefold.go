package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// candleCoarse are the tables the fold merges points and trades into, with
// their steps.
var candleCoarse = []struct {
	table string
	step  time.Duration
}{{"candles_5m", 5 * time.Minute}, {"candles_1h", time.Hour}, {"candles_1d", 24 * time.Hour}}

// rawPoint is a row of candle_points: the market's series after one price
// message (migration 008). vals are all_bid, all_ask, then each venue's bid
// and ask, in CandleSeries order.
type rawPoint struct {
	marketID string
	ts       time.Time
	version  int64
	present  int32
	vals     [2 * len(CandleSeries)]*float64
}

// state is the point as series k's state, nil when the point is none of
// the series' (a venue not quoted in it). The cross-venue series has every
// point, its bid or ask nil where no venue that counts quoted that side.
func (p *rawPoint) state(k int) *seriesState {
	if k > 0 && p.present&int32(presentBit(k-1)) == 0 {
		return nil
	}
	bid, ask := p.vals[2*k], p.vals[2*k+1]
	pt := &candlePoint{ts: p.ts, version: p.version, bid: bid, ask: ask}
	return &seriesState{first: pt, last: pt, bidHigh: bid, bidLow: bid, askHigh: ask, askLow: ask}
}

// rawTrade is a row of candle_trades: a trade in the market's terms.
type rawTrade struct {
	marketID string
	ts       time.Time
	id       string
	venue    int16 // position in Venues, from 1: its series' index
	price    float64
	size     float64
	counts   bool // in the cross-venue series
}

// state is the trade as series k's state, nil when it is none of the
// series' trades.
func (t *rawTrade) state(k int) *seriesState {
	if k == 0 && !t.counts || k > 0 && int(t.venue) != k {
		return nil
	}
	tr := &candleTrade{ts: t.ts, id: t.id, price: t.price}
	return &seriesState{trades: 1, volume: t.size, open: tr, close: tr, tradeHigh: t.price, tradeLow: t.price}
}

// addState merges st into *into (st may be nil).
func addState(into **seriesState, st *seriesState) {
	switch {
	case st == nil:
	case *into == nil:
		*into = st
	default:
		(*into).merge(st)
	}
}

// moveQueuedSQL takes what a queue holds, appends it to the 1m store and
// returns how many rows it moved, with each one whose ts is before $1 (late:
// its bucket was closed), or one row of NULLs beside the count when none is.
// %[2]s adds the queue's other sources to moved (see movePointsSQL).
const moveQueuedSQL = `
	WITH moved_rows AS (
	    DELETE FROM %[1]s_new RETURNING *
	)%[2]s, kept AS (
	    INSERT INTO %[1]s SELECT * FROM moved
	)
	SELECT c.n, m.*
	FROM (SELECT count(*) AS n FROM moved) c
	LEFT JOIN moved m ON m.ts < $1`

var (
	// movePointsSQL moves the points queue: its rows (what a release before
	// migration 009 queued) and its batches' points.
	movePointsSQL = fmt.Sprintf(moveQueuedSQL, "candle_points", `, moved_batches AS (
	    DELETE FROM candle_point_batches RETURNING *
	), moved AS (
	    SELECT * FROM moved_rows
	    UNION ALL
	    SELECT p.*
	    FROM moved_batches b
	    CROSS JOIN LATERAL unnest(b.market_id, b.ts, b.version, b.present, b.all_bid, b.all_ask,
	                              b.a_bid, b.a_ask, b.b_bid, b.b_ask, b.c_bid, b.c_ask, b.d_bid, b.d_ask)
	        AS p(market_id, ts, version, present, all_bid, all_ask, a_bid, a_ask, b_bid, b_ask, c_bid, c_ask, d_bid, d_ask)
	)`)
	// moveTradesSQL moves the trades queue.
	moveTradesSQL = fmt.Sprintf(moveQueuedSQL, "candle_trades", `, moved AS (
	    SELECT * FROM moved_rows
	)`)
)

// FoldResult is what one FoldCandles did.
type FoldResult struct {
	// Points and Trades count the rows it moved from the queues.
	Points, Trades int
	// Closed is the fold's mark after it: the coarse tables hold every
	// point and trade before it (zero: nothing closed yet).
	Closed time.Time
}

// closeSpan is the most time one close statement covers.
const closeSpan = time.Hour

// foldBudget is how long one FoldCandles goes on closing buckets.
const foldBudget = time.Second

// FoldCandles folds what the candle queues hold and closes the 5m buckets
// that ended a grace ago (migration 008). In each transaction, under the
// fold's row lock (one folder at a time):
//
//  1. what the queues hold leaves them for the 1m store; the rows of
//     buckets already closed (late) merge into the coarse tables at once;
//  2. the buckets from the first one from the mark on that holds data, up
//     to closeSpan of them, that ended closeGrace before now are closed:
//     their 5m rows are built from the 1m store (closeSQL), and the hours
//     and days the mark moves past are rolled up (rollHourSQL, rollDaySQL);
//     the mark moves past them (to now's limit when no data is left).
//
// What a transaction took is folded exactly once, however many processes
// fold and wherever one stops: the coarse tables hold exactly the points
// and trades before the mark (the late ones with them), and reads add the
// rest from the store and the queues.
func (s *Store) FoldCandles(ctx context.Context, now time.Time) (FoldResult, error) {
	var res FoldResult
	limit := now.UTC().Add(-closeGrace).Truncate(closeStep)
	began := time.Now()
	for {
		var np, nt int
		var closed bool
		var mark time.Time
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			np, nt, closed = 0, 0, false
			var m foldMarks
			if err := m.lock(ctx, tx); err != nil {
				return err
			}
			late, n, k, err := takeQueued(ctx, tx, m.closed)
			if err != nil {
				return err
			}
			np, nt = n, k
			if err := m.mergeLate(ctx, tx, late); err != nil {
				return err
			}
			// The next bucket to close is the first from the mark that holds
			// data: empty ones are passed over (their late rows, if any come,
			// merge on their own).
			var first *time.Time
			if err := tx.QueryRow(ctx, `SELECT least(
				(SELECT min(ts) FROM candle_points WHERE ts >= $1 AND ts < $2),
				(SELECT min(ts) FROM candle_trades WHERE ts >= $1 AND ts < $2))`, m.closed, limit).Scan(&first); err != nil {
				return fmt.Errorf("find the next bucket to close: %w", err)
			}
			switch {
			case first != nil:
				// Up to closeSpan of buckets at once: one bucket in the
				// steady state, more when catching up.
				b := first.UTC().Truncate(closeStep)
				upTo := b.Add(closeSpan)
				if upTo.After(limit) {
					upTo = limit
				}
				if _, err := tx.Exec(ctx, closeSQL, b, upTo); err != nil {
					return fmt.Errorf("close the buckets from %s: %w", b.Format(time.RFC3339), err)
				}
				closed = true
				if err := m.advance(ctx, tx, b, upTo); err != nil {
					return err
				}
			case m.closed.Before(limit):
				closed = true
				if err := m.advance(ctx, tx, limit, limit); err != nil {
					return err
				}
			}
			mark = m.closed
			if closed {
				if _, err := tx.Exec(ctx, `UPDATE candle_fold SET closed = $1, hours = $2, days = $3`, m.closed, m.hours, m.days); err != nil {
					return fmt.Errorf("move the fold's marks: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("store: fold candles: %w", err)
		}
		res.Points, res.Trades = res.Points+np, res.Trades+nt
		if !mark.IsZero() {
			res.Closed = mark
		}
		// Go on while buckets are left to close, for up to foldBudget a
		// call: the queues wait for the next call meanwhile (reads take them
		// where they are), so a long outage is caught up by calls a second
		// apart.
		if !closed || time.Since(began) >= foldBudget || !mark.Before(limit) {
			return res, nil
		}
	}
}

// takeQueued moves what the queues hold into the 1m store, in tx, and
// returns the late rows (ts before mark) as 1m rows, with how many points and
// trades it moved.
func takeQueued(ctx context.Context, tx pgx.Tx, mark time.Time) ([]candleRow, int, int, error) {
	var out []candleRow
	var n int64
	var id, tradeID *string
	var ts *time.Time
	var version *int64
	var present *int32
	var p rawPoint
	dest := []any{&n, &id, &ts, &version, &present}
	for i := range p.vals {
		dest = append(dest, &p.vals[i])
	}
	rows, err := tx.Query(ctx, movePointsSQL, mark)
	if err != nil {
		return nil, 0, 0, err
	}
	if _, err := pgx.ForEachRow(rows, dest, func() error {
		if id == nil {
			return nil
		}
		q := rawPoint{marketID: *id, ts: ts.UTC(), version: *version, present: *present, vals: cloneVals(p.vals)}
		r := candleRow{marketID: q.marketID, bucket: q.ts.Truncate(time.Minute)}
		for k := range r.series {
			r.series[k] = q.state(k)
		}
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, 0, 0, fmt.Errorf("move points: %w", err)
	}
	points := int(n)
	var venue *int16
	var price, size *float64
	var counts *bool
	rows, err = tx.Query(ctx, moveTradesSQL, mark)
	if err != nil {
		return nil, 0, 0, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&n, &id, &ts, &tradeID, &venue, &price, &size, &counts}, func() error {
		if id == nil {
			return nil
		}
		t := rawTrade{marketID: *id, ts: ts.UTC(), id: *tradeID, venue: *venue, price: *price, size: *size, counts: *counts}
		r := candleRow{marketID: t.marketID, bucket: t.ts.Truncate(time.Minute)}
		for k := range r.series {
			r.series[k] = t.state(k)
		}
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, 0, 0, fmt.Errorf("move trades: %w", err)
	}
	return out, points, int(n), nil
}

// dest scans a candle_trades row (SELECT *).
func (t *rawTrade) dest() []any {
	return []any{&t.marketID, &t.ts, &t.id, &t.venue, &t.price, &t.size, &t.counts}
}

// cloneVals copies the values a scan may reuse for the next row.
func cloneVals(v [2 * len(CandleSeries)]*float64) [2 * len(CandleSeries)]*float64 {
	for i := range v {
		v[i] = clone(v[i])
	}
	return v
}

// foldCandles merges rows into buckets of step, in key order.
func foldCandles(rows []candleRow, step time.Duration) []candleRow {
	type key struct {
		id     string
		bucket time.Time
	}
	at := map[key]int{}
	var out []candleRow
	for _, r := range rows {
		k := key{r.marketID, r.bucket.Truncate(step)}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, candleRow{marketID: k.id, bucket: k.bucket})
			i = len(out) - 1
		}
		for s, st := range r.series {
			switch {
			case st == nil:
			case out[i].series[s] == nil:
				c := *st
				out[i].series[s] = &c
			default:
				out[i].series[s].merge(st)
			}
		}
	}
	slices.SortFunc(out, func(a, b candleRow) int {
		if c := strings.Compare(a.marketID, b.marketID); c != 0 {
			return c
		}
		return a.bucket.Compare(b.bucket)
	})
	return out
}

// coarseUpsertSQL merges rows given as one array per column (candleRowArgs)
// into table.
func coarseUpsertSQL(table string) string {
	casts := []string{"$1::text[]", "$2::timestamptz[]"}
	for range CandleSeries {
		for _, t := range candleColumnTypes {
			casts = append(casts, fmt.Sprintf("$%d::%s[]", len(casts)+1, t))
		}
	}
	set := append(allSeries(candlePointMerge), allSeries(candleTradeMerge)...)
	return candleUpsert(table, candleColumnsAll, set, "SELECT * FROM unnest("+strings.Join(casts, ", ")+")")
}

// VacuumCandleQueues vacuums the two queues. Each fold deletes every row
// they hold, so without vacuum their dead rows pile up, and every fold and
// every read, which scan them, slows with the queues' whole history (a
// table of inserts only keeps growing: its free space is found by vacuum);
// autovacuum may come too late for a table that turns over every second,
// or not at all (this project's test machine runs without it). A few
// milliseconds for tables that hold a second of rows.
func (s *Store) VacuumCandleQueues(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `VACUUM (SKIP_LOCKED) candle_points_new, candle_point_batches, candle_trades_new`); err != nil {
		return fmt.Errorf("store: vacuum the candle queues: %w", err)
	}
	return nil
}

// foldMarks are the fold's marks (candle_fold): candles_5m holds exactly the
// points and trades before closed, candles_1h those before hours, candles_1d
// those before days; hours is closed's hour and days hours' day (zero: none
// yet). The 5m rows from hours on are those of the hour not rolled up yet,
// the 1h rows from days on those of the day.
type foldMarks struct {
	closed, hours, days time.Time
}

// lock reads the marks under the fold's row lock, held to the end of tx.
func (m *foldMarks) lock(ctx context.Context, tx pgx.Tx) error {
	var c, h, d *time.Time
	if err := tx.QueryRow(ctx, `SELECT closed, hours, days FROM candle_fold FOR UPDATE`).Scan(&c, &h, &d); err != nil {
		return fmt.Errorf("lock the fold: %w", err)
	}
	for _, p := range []struct {
		from *time.Time
		to   *time.Time
	}{{c, &m.closed}, {h, &m.hours}, {d, &m.days}} {
		if p.from != nil {
			*p.to = p.from.UTC()
		}
	}
	return nil
}

// mergeLate merges late rows (before closed) into each coarse table that
// already holds their time.
func (m *foldMarks) mergeLate(ctx context.Context, tx pgx.Tx, late []candleRow) error {
	for _, c := range candleCoarse {
		mark := map[string]time.Time{"candles_5m": m.closed, "candles_1h": m.hours, "candles_1d": m.days}[c.table]
		var rows []candleRow
		for _, r := range late {
			if r.bucket.Before(mark) {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, coarseUpsertSQL(c.table), candleRowArgs(foldCandles(rows, c.step))...); err != nil {
			return fmt.Errorf("merge late rows into %s: %w", c.table, err)
		}
	}
	return nil
}

// advance moves closed to next once the 5m buckets of [b, next) were closed
// (none, when b is next), and rolls up the hours and then the days it moved
// past: their 5m rows become 1h rows, their 1h rows 1d rows.
func (m *foldMarks) advance(ctx context.Context, tx pgx.Tx, b, next time.Time) error {
	if m.closed.IsZero() {
		m.hours, m.days = b.Truncate(time.Hour), b.Truncate(24*time.Hour)
	}
	m.closed = next
	if hour := next.Truncate(time.Hour); m.hours.Before(hour) {
		if _, err := tx.Exec(ctx, rollHourSQL, m.hours, hour); err != nil {
			return fmt.Errorf("roll up the hours from %s: %w", m.hours.Format(time.RFC3339), err)
		}
		m.hours = hour
	}
	if day := m.hours.Truncate(24 * time.Hour); m.days.Before(day) {
		if _, err := tx.Exec(ctx, rollDaySQL, m.days, day); err != nil {
			return fmt.Errorf("roll up the days from %s: %w", m.days.Format(time.RFC3339), err)
		}
		m.days = day
	}
	return nil
}

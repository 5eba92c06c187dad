package store

import (
	"cmp"
	"time"
)

// seriesState is one series' state in one bucket, as a candle row stores it
// (migration 008): what every point and trade applied in the bucket left.
// States merge (merge is commutative and associative), so a coarser bucket
// is the merge of its finer ones, however they were split.
type seriesState struct {
	first, last                      *candlePoint // nil: no price point
	bidHigh, bidLow, askHigh, askLow *float64
	trades                           int64 // 0: no trade
	volume                           float64
	open, close                      *candleTrade
	tradeHigh, tradeLow              float64
}

// candlePoint is a price point: the series' bid and ask after one price
// message, ordered by (ts, version).
type candlePoint struct {
	ts       time.Time
	version  int64
	bid, ask *float64
}

func (p *candlePoint) compare(q *candlePoint) int {
	return cmp.Or(p.ts.Compare(q.ts), cmp.Compare(p.version, q.version))
}

// candleTrade is a trade as the candles order it, by (ts, trade_id).
type candleTrade struct {
	ts    time.Time
	id    string
	price float64
}

func (t *candleTrade) compare(u *candleTrade) int {
	return cmp.Or(t.ts.Compare(u.ts), cmp.Compare(t.id, u.id))
}

// merge adds o's points and trades to s.
func (s *seriesState) merge(o *seriesState) {
	if o.first != nil && (s.first == nil || o.first.compare(s.first) < 0) {
		s.first = o.first
	}
	if o.last != nil && (s.last == nil || o.last.compare(s.last) > 0) {
		s.last = o.last
	}
	s.bidHigh, s.bidLow = maxOf(s.bidHigh, o.bidHigh), minOf(s.bidLow, o.bidLow)
	s.askHigh, s.askLow = maxOf(s.askHigh, o.askHigh), minOf(s.askLow, o.askLow)
	if o.trades == 0 {
		return
	}
	if s.trades == 0 {
		s.tradeHigh, s.tradeLow = o.tradeHigh, o.tradeLow
	} else {
		s.tradeHigh, s.tradeLow = max(s.tradeHigh, o.tradeHigh), min(s.tradeLow, o.tradeLow)
	}
	s.trades += o.trades
	s.volume += o.volume
	if s.open == nil || o.open.compare(s.open) < 0 {
		s.open = o.open
	}
	if s.close == nil || o.close.compare(s.close) > 0 {
		s.close = o.close
	}
}

// maxOf and minOf skip a nil side, as GREATEST and LEAST skip NULL.
func maxOf(a, b *float64) *float64 {
	if a == nil || b != nil && *b > *a {
		return b
	}
	return a
}

func minOf(a, b *float64) *float64 {
	if a == nil || b != nil && *b < *a {
		return b
	}
	return a
}

// seriesScan scans one series' columns (candleColumns order), any of them NULL.
type seriesScan struct {
	firstTS, lastTS, openTS, closeTS *time.Time
	firstVersion, lastVersion        *int64
	firstBid, firstAsk               *float64
	lastBid, lastAsk                 *float64
	bidHigh, bidLow, askHigh, askLow *float64
	trades                           *int32
	volume, open, close, tHigh, tLow *float64
	openID, closeID                  *string
}

func (c *seriesScan) dest() []any {
	return []any{
		&c.firstTS, &c.firstVersion, &c.firstBid, &c.firstAsk,
		&c.lastTS, &c.lastVersion, &c.lastBid, &c.lastAsk,
		&c.bidHigh, &c.bidLow, &c.askHigh, &c.askLow,
		&c.trades, &c.volume,
		&c.openTS, &c.openID, &c.open,
		&c.closeTS, &c.closeID, &c.close,
		&c.tHigh, &c.tLow,
	}
}

// state is what was scanned; nil when the series has nothing in the row.
func (c *seriesScan) state() *seriesState {
	// Copies: the scan may reuse what the pointers point to for the next row.
	s := &seriesState{bidHigh: clone(c.bidHigh), bidLow: clone(c.bidLow), askHigh: clone(c.askHigh), askLow: clone(c.askLow)}
	if c.firstTS != nil && c.lastTS != nil {
		s.first = &candlePoint{ts: c.firstTS.UTC(), version: deref(c.firstVersion), bid: clone(c.firstBid), ask: clone(c.firstAsk)}
		s.last = &candlePoint{ts: c.lastTS.UTC(), version: deref(c.lastVersion), bid: clone(c.lastBid), ask: clone(c.lastAsk)}
	}
	if c.trades != nil && *c.trades > 0 && c.openTS != nil && c.closeTS != nil {
		s.trades, s.volume = int64(*c.trades), deref(c.volume)
		s.open = &candleTrade{ts: c.openTS.UTC(), id: deref(c.openID), price: deref(c.open)}
		s.close = &candleTrade{ts: c.closeTS.UTC(), id: deref(c.closeID), price: deref(c.close)}
		s.tradeHigh, s.tradeLow = deref(c.tHigh), deref(c.tLow)
	}
	if s.first == nil && s.trades == 0 {
		return nil
	}
	return s
}

func clone(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// candleRow is a whole candle row: every series' state in one bucket.
type candleRow struct {
	marketID string
	bucket   time.Time
	series   [len(CandleSeries)]*seriesState
}

// candleColumnsAll are every series' columns, in table order.
var candleColumnsAll = allSeries(candleColumns)

// candleRowArgs turns rows into one array per column (market_id, bucket,
// then candleColumnsAll), the parameters of an unnest.
func candleRowArgs(rows []candleRow) []any {
	n := len(rows)
	ids, buckets := make([]string, n), make([]time.Time, n)
	args := []any{ids, buckets}
	type cols struct {
		firstTS, lastTS, openTS, closeTS []*time.Time
		firstVersion, lastVersion        []*int64
		floats                           [13][]*float64
		trades                           []*int32
		openID, closeID                  []*string
	}
	var per [len(CandleSeries)]cols
	for k := range per {
		c := &per[k]
		c.firstTS, c.lastTS, c.openTS, c.closeTS = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		c.firstVersion, c.lastVersion = make([]*int64, n), make([]*int64, n)
		for f := range c.floats {
			c.floats[f] = make([]*float64, n)
		}
		c.trades, c.openID, c.closeID = make([]*int32, n), make([]*string, n), make([]*string, n)
	}
	for i, r := range rows {
		ids[i], buckets[i] = r.marketID, r.bucket
		for k, s := range r.series {
			if s == nil {
				continue
			}
			c := &per[k]
			if s.first != nil {
				c.firstTS[i], c.firstVersion[i], c.floats[0][i], c.floats[1][i] = &s.first.ts, &s.first.version, s.first.bid, s.first.ask
				c.lastTS[i], c.lastVersion[i], c.floats[2][i], c.floats[3][i] = &s.last.ts, &s.last.version, s.last.bid, s.last.ask
			}
			c.floats[4][i], c.floats[5][i], c.floats[6][i], c.floats[7][i] = s.bidHigh, s.bidLow, s.askHigh, s.askLow
			if s.trades > 0 {
				trades := int32(s.trades)
				c.trades[i], c.floats[8][i] = &trades, &s.volume
				c.openTS[i], c.openID[i], c.floats[9][i] = &s.open.ts, &s.open.id, &s.open.price
				c.closeTS[i], c.closeID[i], c.floats[10][i] = &s.close.ts, &s.close.id, &s.close.price
				c.floats[11][i], c.floats[12][i] = &s.tradeHigh, &s.tradeLow
			}
		}
	}
	for k := range per {
		c := &per[k]
		f := c.floats
		args = append(args,
			c.firstTS, c.firstVersion, f[0], f[1], c.lastTS, c.lastVersion, f[2], f[3],
			f[4], f[5], f[6], f[7],
			c.trades, f[8], c.openTS, c.openID, f[9], c.closeTS, c.closeID, f[10], f[11], f[12])
	}
	return args
}

// candleColumnTypes are the SQL types of one series' columns, in candleColumns order.
var candleColumnTypes = []string{
	"timestamptz", "bigint", "float8", "float8", "timestamptz", "bigint", "float8", "float8",
	"float8", "float8", "float8", "float8",
	"int", "float8", "timestamptz", "text", "float8", "timestamptz", "text", "float8", "float8", "float8",
}

package store

import (
	"fmt"
	"strings"
	"time"
)

// Closing a 5m bucket (FoldCandles): the 1m store's points and trades of the
// bucket, grouped by market in Postgres, become the bucket's candles_5m rows
// and merge into the candles_1h and candles_1d rows of its hour and day. One
// statement per bucket and table, so no coarse row is written twice by one
// statement.

// closeStep is the bucket the fold closes at a time: the finest coarse table's.
const closeStep = 5 * time.Minute

// closeGrace is how long after its end a bucket is closed: a point that
// comes later is late, and merges into the coarse tables on its own.
const closeGrace = time.Minute

// usExpr is a timestamptz column as microseconds since the epoch, exact in
// a float8 (2^53 µs is 285 years).
func usExpr(col string) string {
	return "(extract(epoch FROM " + col + ") * 1000000)::float8"
}

// fromUS is usExpr's inverse.
func fromUS(expr string) string {
	return "(TIMESTAMPTZ 'epoch' + (" + expr + ") * INTERVAL '1 microsecond')"
}

// closePointCols are the candle columns of series k (at CandleSeries[k])
// aggregated from candle_points rows: the first and last point by (ts,
// version) as float8 arrays (compared element by element; the pair is unique
// in a market, so bid and ask never decide), and the extremes.
func closePointCols(k int) []string {
	s, col := CandleSeries[k], "all"
	filter := ""
	if k > 0 {
		col = string(rune('a' + k - 1))
		filter = fmt.Sprintf(" FILTER (WHERE present & %d <> 0)", presentBit(k-1))
	}
	arr := fmt.Sprintf("ARRAY[%s, version::float8, %s_bid, %s_ask]", usExpr("ts"), col, col)
	var out []string
	for _, g := range []struct{ name, agg string }{{"first", "min"}, {"last", "max"}} {
		a := fmt.Sprintf("(%s(%s)%s)", g.agg, arr, filter)
		out = append(out,
			fromUS(a+"[1]")+fmt.Sprintf(" AS %s_%s_ts", s, g.name),
			fmt.Sprintf("%s[2]::bigint AS %s_%s_version", a, s, g.name),
			fmt.Sprintf("%s[3] AS %s_%s_bid", a, s, g.name),
			fmt.Sprintf("%s[4] AS %s_%s_ask", a, s, g.name))
	}
	return append(out,
		fmt.Sprintf("max(%s_bid)%s AS %s_bid_high", col, filter, s),
		fmt.Sprintf("min(%s_bid)%s AS %s_bid_low", col, filter, s),
		fmt.Sprintf("max(%s_ask)%s AS %s_ask_high", col, filter, s),
		fmt.Sprintf("min(%s_ask)%s AS %s_ask_low", col, filter, s))
}

// closeTradeCols are series k's trade columns aggregated from candle_trades
// rows: count and volume (NULL for none), the first and last trade by (ts,
// trade_id), the extremes.
func closeTradeCols(k int) []string {
	s := CandleSeries[k]
	filter := " FILTER (WHERE counts)"
	if k > 0 {
		filter = fmt.Sprintf(" FILTER (WHERE venue = %d)", k)
	}
	out := []string{
		fmt.Sprintf("NULLIF(count(*)%s, 0)::int AS %s_trades", filter, s),
		fmt.Sprintf("sum(size)%s AS %s_volume", filter, s),
	}
	for _, g := range []struct{ name, order string }{{"open", "ts, trade_id"}, {"close", "ts DESC, trade_id DESC"}} {
		for _, c := range []struct{ col, name string }{{"ts", "ts"}, {"trade_id", "id"}, {"price", ""}} {
			name := s + "_trade_" + g.name
			if c.name != "" {
				name += "_" + c.name
			}
			out = append(out, fmt.Sprintf("(array_agg(%s ORDER BY %s)%s)[1] AS %s", c.col, g.order, filter, name))
		}
	}
	return append(out,
		fmt.Sprintf("max(price)%s AS %s_trade_high", filter, s),
		fmt.Sprintf("min(price)%s AS %s_trade_low", filter, s))
}

// closeSQL writes the 5m rows of the bucket [$1, $2) from the 1m store,
// merging into rows already there (none unless the bucket was closed before
// and reopened, which the fold never does; merging keeps it safe).
var closeSQL = func() string {
	var pcols, tcols []string
	for k := range CandleSeries {
		pcols = append(pcols, closePointCols(k)...)
		tcols = append(tcols, closeTradeCols(k)...)
	}
	source := `SELECT market_id, $1::timestamptz AS bucket, ` + strings.Join(candleColumnsAll, ", ") + `
FROM (
    SELECT market_id,
        ` + strings.Join(pcols, ",\n        ") + `
    FROM candle_points WHERE ts >= $1 AND ts < $2
    GROUP BY market_id
) p
FULL JOIN (
    SELECT market_id,
        ` + strings.Join(tcols, ",\n        ") + `
    FROM candle_trades WHERE ts >= $1 AND ts < $2
    GROUP BY market_id
) t USING (market_id)
ORDER BY market_id`
	set := append(allSeries(candlePointMerge), allSeries(candleTradeMerge)...)
	return candleUpsert("candles_5m", candleColumnsAll, set, source)
}()

// rollUpSQL merges the 5m rows of the bucket [$1, $2) into table, whose
// bucket is trunc of a 5m bucket: one 5m bucket a statement, so each row of
// table is merged into once.
func rollUpSQL(table, trunc string) string {
	set := append(allSeries(candlePointMerge), allSeries(candleTradeMerge)...)
	source := `SELECT market_id, ` + trunc + ` AS bucket, ` + strings.Join(candleColumnsAll, ", ") + `
FROM candles_5m WHERE bucket >= $1 AND bucket < $2
ORDER BY market_id`
	return candleUpsert(table, candleColumnsAll, set, source)
}

// closeStatements are the statements that close one 5m bucket, in order.
var closeStatements = []string{
	closeSQL,
	rollUpSQL("candles_1h", "date_trunc('hour', bucket, 'UTC')"),
	rollUpSQL("candles_1d", "date_trunc('day', bucket, 'UTC')"),
}

package store

import (
	"fmt"
	"strings"
	"time"
)

// Closing a 5m bucket (FoldCandles): the 1m store's points and trades of the
// bucket, grouped by market in Postgres, become the bucket's candles_5m rows.
// When the fold moves past an hour, that hour's 5m rows become its 1h rows,
// and past a day, its 1h rows its 1d row: each coarse row is written once
// (a late point merges into those already written).

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
	arr := fmt.Sprintf("ARRAY[us, version::float8, %s_bid, %s_ask]", col, col)
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

// bin5 is the 5m bucket of a ts column.
func bin5(col string) string {
	return "date_bin('5 minutes', " + col + ", TIMESTAMPTZ '2000-01-01 00:00:00+00')"
}

// closeSQL writes the 5m rows of the buckets in [$1, $2) from the 1m store,
// one a market and bucket with data, merging into rows already there (none
// unless a bucket was closed before and reopened, which the fold never
// does; merging keeps it safe).
var closeSQL = func() string {
	var pcols, tcols []string
	for k := range CandleSeries {
		pcols = append(pcols, closePointCols(k)...)
		tcols = append(tcols, closeTradeCols(k)...)
	}
	source := `SELECT market_id, bucket, ` + strings.Join(candleColumnsAll, ", ") + `
FROM (
    SELECT market_id, ` + bin5("ts") + ` AS bucket,
        ` + strings.Join(pcols, ",\n        ") + `
    FROM (SELECT *, ` + usExpr("ts") + ` AS us FROM candle_points WHERE ts >= $1 AND ts < $2) pts
    GROUP BY 1, 2
) p
FULL JOIN (
    SELECT market_id, ` + bin5("ts") + ` AS bucket,
        ` + strings.Join(tcols, ",\n        ") + `
    FROM candle_trades WHERE ts >= $1 AND ts < $2
    GROUP BY 1, 2
) t USING (market_id, bucket)
ORDER BY market_id, bucket`
	set := append(allSeries(candlePointMerge), allSeries(candleTradeMerge)...)
	return candleUpsert("candles_5m", candleColumnsAll, set, source)
}()

// rollUpSQL builds the rows of table (bucket trunc of the source's) from the
// rows of source in [$1, $2), the rows of each market and hour (5m into 1h)
// or day (1h into 1d) into one.
func rollUpSQL(table, source, trunc string) string {
	var cols []string
	for _, s := range CandleSeries {
		cols = append(cols, rollUpCols(s)...)
	}
	set := append(allSeries(candlePointMerge), allSeries(candleTradeMerge)...)
	src := `SELECT market_id, bucket, ` + strings.Join(candleColumnsAll, ", ") + `
FROM (
    SELECT market_id, ` + trunc + ` AS bucket,
        ` + strings.Join(cols, ",\n        ") + `
    FROM ` + source + ` WHERE bucket >= $1 AND bucket < $2
    GROUP BY 1, 2
) r
ORDER BY market_id, bucket`
	return candleUpsert(table, candleColumnsAll, set, src)
}

// rollUpCols are the columns of series s merged over candle rows: first and
// last by (ts, version) among the rows that have points, extremes, sums,
// and the first and last trade by (ts, trade_id).
func rollUpCols(s string) []string {
	var out []string
	for _, g := range []struct{ name, agg string }{{"first", "min"}, {"last", "max"}} {
		a := fmt.Sprintf("(%[2]s(ARRAY[%[3]s, %[1]s_%[4]s_version::float8, %[1]s_%[4]s_bid, %[1]s_%[4]s_ask]) FILTER (WHERE %[1]s_%[4]s_ts IS NOT NULL))",
			s, g.agg, usExpr(s+"_"+g.name+"_ts"), g.name)
		out = append(out,
			fromUS(a+"[1]")+fmt.Sprintf(" AS %s_%s_ts", s, g.name),
			fmt.Sprintf("%s[2]::bigint AS %s_%s_version", a, s, g.name),
			fmt.Sprintf("%s[3] AS %s_%s_bid", a, s, g.name),
			fmt.Sprintf("%s[4] AS %s_%s_ask", a, s, g.name))
	}
	out = append(out,
		fmt.Sprintf("max(%[1]s_bid_high) AS %[1]s_bid_high", s), fmt.Sprintf("min(%[1]s_bid_low) AS %[1]s_bid_low", s),
		fmt.Sprintf("max(%[1]s_ask_high) AS %[1]s_ask_high", s), fmt.Sprintf("min(%[1]s_ask_low) AS %[1]s_ask_low", s),
		fmt.Sprintf("sum(%[1]s_trades)::int AS %[1]s_trades", s), fmt.Sprintf("sum(%[1]s_volume) AS %[1]s_volume", s))
	has := fmt.Sprintf(" FILTER (WHERE %s_trades IS NOT NULL)", s)
	for _, g := range []struct{ name, order string }{{"open", "%[1]s_trade_open_ts, %[1]s_trade_open_id"}, {"close", "%[1]s_trade_close_ts DESC, %[1]s_trade_close_id DESC"}} {
		order := fmt.Sprintf(g.order, s)
		for _, c := range []string{"_ts", "_id", ""} {
			col := s + "_trade_" + g.name + c
			out = append(out, fmt.Sprintf("(array_agg(%s ORDER BY %s)%s)[1] AS %s", col, order, has, col))
		}
	}
	return append(out,
		fmt.Sprintf("max(%[1]s_trade_high) AS %[1]s_trade_high", s), fmt.Sprintf("min(%[1]s_trade_low) AS %[1]s_trade_low", s))
}

var (
	// rollHourSQL builds the candles_1h rows of the hours in a range from
	// their candles_5m rows.
	rollHourSQL = rollUpSQL("candles_1h", "candles_5m", "date_trunc('hour', bucket, 'UTC')")
	// rollDaySQL builds the candles_1d rows of the days in a range from
	// their candles_1h rows.
	rollDaySQL = rollUpSQL("candles_1d", "candles_1h", "date_trunc('day', bucket, 'UTC')")
)

package store

import (
	"fmt"
	"strings"
)

// A candle row holds the state of every series of one market in one bucket
// (migration 008 lists the columns and what they mean). The statements that
// read and merge it are built here from the column names, once, so the five
// series cannot drift apart.

// CandleSeries are the series a candle row holds: the market's cross-venue
// figures ("all"), then each venue's, in Venues order.
var CandleSeries = [5]string{"all", Venues[0], Venues[1], Venues[2], Venues[3]}

// candleSeriesIndex returns the position of series in CandleSeries, or -1.
func candleSeriesIndex(series string) int {
	for i, s := range CandleSeries {
		if s == series {
			return i
		}
	}
	return -1
}

// The columns of one series, in table order, without the series prefix. The
// first and last point columns and the trade open and close columns change
// as groups: a group is replaced whole by an earlier (first, open) or a later
// (last, close) one.
var (
	candleFirstCols = []string{"first_ts", "first_version", "first_bid", "first_ask"}
	candleLastCols  = []string{"last_ts", "last_version", "last_bid", "last_ask"}
	candleQuoteCols = []string{"bid_high", "bid_low", "ask_high", "ask_low"}
	candleOpenCols  = []string{"trade_open_ts", "trade_open_id", "trade_open"}
	candleCloseCols = []string{"trade_close_ts", "trade_close_id", "trade_close"}
	candleTradeCols = []string{"trades", "volume"}
	candleRangeCols = []string{"trade_high", "trade_low"}
)

// candlePointColumns are the price point columns of series s.
func candlePointColumns(s string) []string {
	return prefixed(s, candleFirstCols, candleLastCols, candleQuoteCols)
}

// candleTradeColumns are the trade columns of series s.
func candleTradeColumns(s string) []string {
	return prefixed(s, candleTradeCols, candleOpenCols, candleCloseCols, candleRangeCols)
}

// candleColumns are all columns of series s, in the order candleState scans them.
func candleColumns(s string) []string {
	return append(candlePointColumns(s), candleTradeColumns(s)...)
}

func prefixed(s string, groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		for _, c := range g {
			out = append(out, s+"_"+c)
		}
	}
	return out
}

// candlePointMerge is the ON CONFLICT assignments that merge a new state's
// price points (EXCLUDED) into the stored one (c) for series s. A group is
// taken when the new one comes first (last); high and low keep the extreme
// (GREATEST and LEAST skip NULLs, so a side never seen stays NULL).
func candlePointMerge(s string) []string {
	var out []string
	out = append(out, replaceWhen(s, candleFirstCols, earlier(s+"_first_ts", s+"_first_version"))...)
	out = append(out, replaceWhen(s, candleLastCols, later(s+"_last_ts", s+"_last_version"))...)
	for _, c := range []string{"bid_high", "ask_high"} {
		out = append(out, fmt.Sprintf("%[1]s_%[2]s = GREATEST(c.%[1]s_%[2]s, EXCLUDED.%[1]s_%[2]s)", s, c))
	}
	for _, c := range []string{"bid_low", "ask_low"} {
		out = append(out, fmt.Sprintf("%[1]s_%[2]s = LEAST(c.%[1]s_%[2]s, EXCLUDED.%[1]s_%[2]s)", s, c))
	}
	return out
}

// candleTradeMerge is candlePointMerge for the trade columns: counts and
// volumes add up (NULL is none), open and close are the first and last trade
// by (ts, trade_id).
func candleTradeMerge(s string) []string {
	var out []string
	for _, c := range candleTradeCols {
		out = append(out, fmt.Sprintf(
			"%[1]s_%[2]s = CASE WHEN EXCLUDED.%[1]s_%[2]s IS NULL THEN c.%[1]s_%[2]s ELSE COALESCE(c.%[1]s_%[2]s, 0) + EXCLUDED.%[1]s_%[2]s END", s, c))
	}
	out = append(out, replaceWhen(s, candleOpenCols, earlier(s+"_trade_open_ts", s+"_trade_open_id"))...)
	out = append(out, replaceWhen(s, candleCloseCols, later(s+"_trade_close_ts", s+"_trade_close_id"))...)
	out = append(out,
		fmt.Sprintf("%[1]s_trade_high = GREATEST(c.%[1]s_trade_high, EXCLUDED.%[1]s_trade_high)", s),
		fmt.Sprintf("%[1]s_trade_low = LEAST(c.%[1]s_trade_low, EXCLUDED.%[1]s_trade_low)", s))
	return out
}

// earlier is the condition "the new (ts, tiebreak) exists and comes before
// the stored one, or none is stored": a row comparison with a NULL side is
// NULL, which COALESCE turns into whether the new one exists.
func earlier(ts, tie string) string {
	return fmt.Sprintf("COALESCE((EXCLUDED.%[1]s, EXCLUDED.%[2]s) < (c.%[1]s, c.%[2]s), EXCLUDED.%[1]s IS NOT NULL)", ts, tie)
}

// later is earlier's mirror.
func later(ts, tie string) string {
	return fmt.Sprintf("COALESCE((EXCLUDED.%[1]s, EXCLUDED.%[2]s) > (c.%[1]s, c.%[2]s), EXCLUDED.%[1]s IS NOT NULL)", ts, tie)
}

func replaceWhen(s string, cols []string, cond string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = fmt.Sprintf("%[1]s_%[2]s = CASE WHEN %[3]s THEN EXCLUDED.%[1]s_%[2]s ELSE c.%[1]s_%[2]s END", s, c, cond)
	}
	return out
}

// candleUpsert is an INSERT of rows from source (a SELECT giving market_id,
// bucket and cols, in that order) into table, merging into the rows already
// there with set.
func candleUpsert(table string, cols, set []string, source string) string {
	return "INSERT INTO " + table + " AS c (market_id, bucket,\n    " + strings.Join(cols, ",\n    ") + ")\n" +
		source + "\nON CONFLICT (market_id, bucket) DO UPDATE SET\n    " + strings.Join(set, ",\n    ")
}

// allSeries applies fn to every series and concatenates the results.
func allSeries(fn func(s string) []string) []string {
	var out []string
	for _, s := range CandleSeries {
		out = append(out, fn(s)...)
	}
	return out
}

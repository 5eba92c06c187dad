package store

import (
	"fmt"
	"strconv"
	"strings"
)

// The batch statement writes a batch's prices and trades and the candles
// they make, in one statement (so a prices-only batch stays one round trip,
// and each transaction locks its candle rows in one ascending pass: two
// batches cannot deadlock on them). Its common table expressions all see the
// snapshot taken before the statement, so "above the version stored before
// the batch" and "inserted now, not a redelivery" are decided in SQL:
//
//	u, up   the prices, deduplicated, upserted as before;
//	r       each price's market document (rev, deps stamp), the market and
//	        event rows where the document's deps stamp differs from the
//	        process's cached one, and the venues' modes (candle_modes): from
//	        the cached market row when its stamp is still the stored one;
//	pt, pv  every price message of the batch (before deduplication) whose
//	        market's price was written and whose version is above the one
//	        stored before: a point of the candles; pq adds the series' values;
//	t, ins  the trades, inserted as before; tv keeps those inserted now;
//	tm      each trade's market's modes, as r;
//	pagg, tagg  the points and trades by market and minute: first and last
//	        by rank ((ts, version) and (ts, trade_id) order, given as
//	        parameters), high and low, count and volume;
//	c       the merge of both into candles_1m.
//
// The main query reads the price documents as the statement before candles
// did (see pricebatch.go).

// pricesPart is the prices' CTEs; {pN} are its parameters.
const pricesPart = `u AS (
    SELECT *
    FROM unnest({p1}::text[], {p2}::bigint[], {p3}::timestamptz[], {p4}::text[], {p5}::bigint[], {p6}::text[])
        AS u(market_id, version, ts, quotes, cached, modes)
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
), r AS (
    SELECT u.market_id, d.rev, d.deps,
           CASE WHEN d.deps <> u.cached THEN candle_modes(m.matches) ELSE u.modes END AS modes,
           ` + marketColumns + `, ` + eventColumns + `
    FROM u
    JOIN doc_revs d ON d.doc = 'm:' || u.market_id
    LEFT JOIN markets m ON m.universal_id = CASE WHEN d.deps <> u.cached THEN u.market_id END
    LEFT JOIN events e ON e.universal_id = m.event_id
), pt AS (
    SELECT *
    FROM unnest({p7}::text[], {p8}::bigint[], {p9}::timestamptz[], {p10}::bool[], {p11}::int[],
                {p12}::float8[], {p13}::float8[], {p14}::float8[], {p15}::float8[],
                {p16}::float8[], {p17}::float8[], {p18}::float8[], {p19}::float8[])
        WITH ORDINALITY AS pt(market_id, version, ts, multi, present,
                              a_bid, a_ask, b_bid, b_ask, c_bid, c_ask, d_bid, d_ask, n)
), pv AS (
    SELECT pt.market_id, pt.ts, pt.version, pt.n, pt.multi, pt.present,
           substr(r.modes, 1, 1) AS ma, substr(r.modes, 2, 1) AS mb,
           substr(r.modes, 3, 1) AS mc, substr(r.modes, 4, 1) AS md,
           CASE substr(r.modes, 1, 1) WHEN 'i' THEN 1 - pt.a_ask ELSE pt.a_bid END AS venue_a_bid,
           CASE substr(r.modes, 1, 1) WHEN 'i' THEN 1 - pt.a_bid ELSE pt.a_ask END AS venue_a_ask,
           CASE substr(r.modes, 2, 1) WHEN 'i' THEN 1 - pt.b_ask ELSE pt.b_bid END AS venue_b_bid,
           CASE substr(r.modes, 2, 1) WHEN 'i' THEN 1 - pt.b_bid ELSE pt.b_ask END AS venue_b_ask,
           CASE substr(r.modes, 3, 1) WHEN 'i' THEN 1 - pt.c_ask ELSE pt.c_bid END AS venue_c_bid,
           CASE substr(r.modes, 3, 1) WHEN 'i' THEN 1 - pt.c_bid ELSE pt.c_ask END AS venue_c_ask,
           CASE substr(r.modes, 4, 1) WHEN 'i' THEN 1 - pt.d_ask ELSE pt.d_bid END AS venue_d_bid,
           CASE substr(r.modes, 4, 1) WHEN 'i' THEN 1 - pt.d_bid ELSE pt.d_ask END AS venue_d_ask
    FROM pt
    JOIN up ON up.market_id = pt.market_id
    JOIN r ON r.market_id = pt.market_id
    -- The stored version matters only for a market with several points in
    -- the batch: a single one counts exactly when its price was written.
    WHERE CASE WHEN pt.multi
               THEN pt.version > COALESCE((SELECT p0.version FROM prices p0 WHERE p0.market_id = pt.market_id), 0)
               ELSE true
          END
), pq AS (
    SELECT pv.*,
           GREATEST(CASE WHEN ma <> 'x' THEN venue_a_bid END, CASE WHEN mb <> 'x' THEN venue_b_bid END,
                    CASE WHEN mc <> 'x' THEN venue_c_bid END, CASE WHEN md <> 'x' THEN venue_d_bid END) AS all_bid,
           LEAST(CASE WHEN ma <> 'x' THEN venue_a_ask END, CASE WHEN mb <> 'x' THEN venue_b_ask END,
                 CASE WHEN mc <> 'x' THEN venue_c_ask END, CASE WHEN md <> 'x' THEN venue_d_ask END) AS all_ask
    FROM pv
)`

// tradesPart is the trades' CTEs; {tN} are its parameters.
const tradesPart = `t AS (
    SELECT *
    FROM unnest({t1}::text[], {t2}::text[], {t3}::text[], {t4}::float8[], {t5}::float8[],
                {t6}::text[], {t7}::timestamptz[], {t8}::int[], {t9}::bigint[])
        WITH ORDINALITY AS t(trade_id, market_id, venue, price, size, side, ts, vi, rank, n)
), ins AS (
    INSERT INTO trades (trade_id, market_id, venue, price, size, side, ts)
    SELECT t.trade_id, t.market_id, t.venue, t.price, t.size, t.side, t.ts
    FROM t
    ON CONFLICT (trade_id) DO NOTHING
    RETURNING trade_id
), tm AS (
    SELECT tm.market_id,
           CASE WHEN d.deps IS DISTINCT FROM tm.cached THEN candle_modes(m.matches) ELSE tm.modes END AS modes
    FROM unnest({t10}::text[], {t11}::bigint[], {t12}::text[]) AS tm(market_id, cached, modes)
    LEFT JOIN doc_revs d ON d.doc = 'm:' || tm.market_id
    LEFT JOIN markets m ON m.universal_id = CASE WHEN d.deps IS DISTINCT FROM tm.cached THEN tm.market_id END
), tv AS (
    SELECT t.market_id, t.ts, t.rank, t.n, t.vi, t.size,
           substr(tm.modes, t.vi, 1) <> 'x' AS counts,
           CASE substr(tm.modes, t.vi, 1) WHEN 'i' THEN 1 - t.price ELSE t.price END AS price
    FROM ins
    JOIN t ON t.trade_id = ins.trade_id
    JOIN tm ON tm.market_id = t.market_id
)`

// docsQuery is the main query when the batch has prices: r's columns, then
// whether the price was written, then the stored price where it was not.
const docsQuery = `
SELECT r.*, up.market_id IS NOT NULL, p.market_id, p.version, p.ts, p.quotes
FROM r
LEFT JOIN up ON up.market_id = r.market_id
LEFT JOIN prices p ON p.market_id = CASE WHEN up.market_id IS NULL THEN r.market_id END`

// pricesParams and tradesParams are how many parameters each part takes.
const (
	pricesParams = 19
	tradesParams = 12
)

// candleTarget is a candle table the batch statement writes and the SQL
// expression of a point's bucket in it (of ts).
type candleTarget struct {
	table, bucket string
}

// candleTargets are the tables ingest writes: 1m only. The coarser tables
// are filled by the sweep (candlesweep.go): writing them here too cost more
// than the budget (docs/benchmarks.md, "Candles storage").
var candleTargets = []candleTarget{{"candles_1m", "date_bin('1 minute', ts, TIMESTAMPTZ '2000-01-01 00:00:00+00')"}}

// batchStatements are the batch statement for each shape of batch, by [has
// prices][has trades]; none writes candles when targets is empty.
type batchStatements [2][2]string

func newBatchStatements(targets []candleTarget) *batchStatements {
	return &batchStatements{
		{"", buildBatchSQL(false, true, targets)},
		{buildBatchSQL(true, false, targets), buildBatchSQL(true, true, targets)},
	}
}

// defaultBatchStatements are the statements of candleTargets.
var defaultBatchStatements = newBatchStatements(candleTargets)

// buildBatchSQL writes the batch statement for a batch with prices, trades
// or both, merging candles into targets.
func buildBatchSQL(prices, trades bool, targets []candleTarget) string {
	var parts []string
	if prices {
		parts = append(parts, pricesPart)
	}
	if trades {
		parts = append(parts, tradesPart)
	}
	for i, tg := range targets {
		if tg.table == "candle_points_go" {
			if prices {
				parts = append(parts, `cp AS (
    INSERT INTO candle_points (market_id, ts, version, present, all_bid, all_ask,
        a_bid, a_ask, b_bid, b_ask, c_bid, c_ask, d_bid, d_ask)
    SELECT pt.market_id, pt.ts, pt.version, pt.present,
        GREATEST(pt.a_bid, pt.b_bid, pt.c_bid, pt.d_bid), LEAST(pt.a_ask, pt.b_ask, pt.c_ask, pt.d_ask),
        pt.a_bid, pt.a_ask, pt.b_bid, pt.b_ask, pt.c_bid, pt.c_ask, pt.d_bid, pt.d_ask
    FROM pt
    JOIN up ON up.market_id = pt.market_id
    WHERE NOT pt.multi
       OR pt.version > COALESCE((SELECT p0.version FROM prices p0 WHERE p0.market_id = pt.market_id), 0)
)`)
			}
			continue
		}
		if tg.table == "candle_points" {
			if prices {
				parts = append(parts, `cp AS (
    INSERT INTO candle_points (market_id, ts, version, present, all_bid, all_ask,
        a_bid, a_ask, b_bid, b_ask, c_bid, c_ask, d_bid, d_ask)
    SELECT market_id, ts, version, present, all_bid, all_ask,
        venue_a_bid, venue_a_ask, venue_b_bid, venue_b_ask, venue_c_bid, venue_c_ask, venue_d_bid, venue_d_ask
    FROM pq
)`)
			}
			continue
		}
		parts = append(parts, candleParts(prices, trades, tg, strconv.Itoa(i))...)
	}
	main := "\nSELECT count(*) FROM ins"
	if prices {
		main = docsQuery
	}
	sql := "WITH " + strings.Join(parts, ", ") + main
	var params []string
	for i := 1; i <= pricesParams; i++ {
		params = append(params, "{p"+strconv.Itoa(i)+"}", "$"+strconv.Itoa(i))
	}
	base := 0
	if prices {
		base = pricesParams
	}
	for i := 1; i <= tradesParams; i++ {
		params = append(params, "{t"+strconv.Itoa(i)+"}", "$"+strconv.Itoa(base+i))
	}
	return strings.NewReplacer(params...).Replace(sql)
}

// candleParts are the CTEs that merge the batch's points and trades into
// one candle table: pagg and tagg group them by market and bucket, c merges.
func candleParts(prices, trades bool, tg candleTarget, k string) []string {
	var parts, cols, set, src []string
	from := "pagg" + k
	if prices {
		// A market with one point in the batch (nearly every one) has one
		// per bucket: its columns come straight from the point, and only the
		// others are grouped.
		parts = append(parts, "pagg"+k+" AS (\n    SELECT market_id, "+tg.bucket+" AS bucket,\n           "+
			strings.Join(allSeries(pointColumnsOfOne), ",\n           ")+"\n    FROM pq\n    WHERE NOT multi\n"+
			"    UNION ALL\n    SELECT market_id, bucket,\n           "+strings.Join(allSeries(pointSources), ",\n           ")+
			"\n    FROM (\n        SELECT market_id, "+tg.bucket+" AS bucket,\n               "+
			strings.Join(allSeries(pointAggregates), ",\n               ")+"\n        FROM pq\n        WHERE multi\n        GROUP BY 1, 2\n    ) g\n)")
		cols = append(cols, allSeries(candlePointColumns)...)
		set = append(set, allSeries(candlePointMerge)...)
		src = append(src, allSeries(candlePointColumns)...)
	}
	if trades {
		parts = append(parts, "tagg"+k+" AS (\n    SELECT market_id, "+tg.bucket+" AS bucket,\n           "+
			strings.Join(allSeries(tradeAggregates), ",\n           ")+"\n    FROM tv\n    GROUP BY 1, 2\n)")
		cols = append(cols, allSeries(candleTradeColumns)...)
		set = append(set, allSeries(candleTradeMerge)...)
		src = append(src, allSeries(tradeSources)...)
		from = "tagg" + k
	}
	if prices && trades {
		from = "pagg" + k + " FULL JOIN tagg" + k + " USING (market_id, bucket)"
	}
	// Rows go in key order: every transaction locks its candle rows in the
	// same order.
	source := "SELECT market_id, bucket,\n    " + strings.Join(src, ",\n    ") + "\nFROM " + from + "\nORDER BY market_id, bucket"
	return append(parts, "c"+k+" AS (\n"+candleUpsert(tg.table, cols, set, source)+"\n)")
}

// presentBit is the bit of venue i in a point's present mask.
func presentBit(i int) int { return 1 << i }

// pointAggregates are pagg's columns for series s: the first and last point
// as ARRAY[rank, bid, ask] (an array compares element by element, and ranks
// are unique: no sort needed), and the extremes. A venue's series has a
// point only where the venue was quoted.
func pointAggregates(s string) []string {
	filter := ""
	if i := candleSeriesIndex(s) - 1; i >= 0 {
		filter = fmt.Sprintf(" FILTER (WHERE present & %d <> 0)", presentBit(i))
	}
	return []string{
		fmt.Sprintf("min(ARRAY[n, %[1]s_bid, %[1]s_ask])%[2]s AS %[1]s_first", s, filter),
		fmt.Sprintf("max(ARRAY[n, %[1]s_bid, %[1]s_ask])%[2]s AS %[1]s_last", s, filter),
		fmt.Sprintf("max(%[1]s_bid) AS %[1]s_bid_high", s),
		fmt.Sprintf("min(%[1]s_bid) AS %[1]s_bid_low", s),
		fmt.Sprintf("max(%[1]s_ask) AS %[1]s_ask_high", s),
		fmt.Sprintf("min(%[1]s_ask) AS %[1]s_ask_low", s),
	}
}

// pointSources turn pointAggregates' columns for series s into
// candlePointColumns(s): a rank is the point's position in the parameters,
// which give its ts and version.
func pointSources(s string) []string {
	var out []string
	for _, g := range []string{"first", "last"} {
		rank := fmt.Sprintf("(%s_%s)[1]::int", s, g)
		out = append(out,
			fmt.Sprintf("({p9}::timestamptz[])[%[1]s] AS %[2]s_%[3]s_ts", rank, s, g),
			fmt.Sprintf("({p8}::bigint[])[%[1]s] AS %[2]s_%[3]s_version", rank, s, g),
			fmt.Sprintf("(%[1]s_%[2]s)[2] AS %[1]s_%[2]s_bid", s, g), fmt.Sprintf("(%[1]s_%[2]s)[3] AS %[1]s_%[2]s_ask", s, g))
	}
	return append(out, s+"_bid_high", s+"_bid_low", s+"_ask_high", s+"_ask_low")
}

// pointColumnsOfOne are candlePointColumns(s) of a bucket with one point: the
// point is first and last, high and low.
func pointColumnsOfOne(s string) []string {
	ts, version := "ts", "version"
	if i := candleSeriesIndex(s) - 1; i >= 0 {
		ts = fmt.Sprintf("CASE WHEN present & %d <> 0 THEN ts END", presentBit(i))
		version = fmt.Sprintf("CASE WHEN present & %d <> 0 THEN version END", presentBit(i))
	}
	var out []string
	for _, g := range []string{"first", "last"} {
		out = append(out, fmt.Sprintf("%s AS %s_%s_ts", ts, s, g), fmt.Sprintf("%s AS %s_%s_version", version, s, g),
			fmt.Sprintf("%[1]s_bid AS %[1]s_%[2]s_bid", s, g), fmt.Sprintf("%[1]s_ask AS %[1]s_%[2]s_ask", s, g))
	}
	return append(out, fmt.Sprintf("%[1]s_bid AS %[1]s_bid_high", s), fmt.Sprintf("%[1]s_bid AS %[1]s_bid_low", s),
		fmt.Sprintf("%[1]s_ask AS %[1]s_ask_high", s), fmt.Sprintf("%[1]s_ask AS %[1]s_ask_low", s))
}

// tradeAggregates are tagg's columns for series s: count and volume (NULL
// for none), the first and last trade as ARRAY[rank, position, price], the
// extremes.
func tradeAggregates(s string) []string {
	filter := "counts"
	if i := candleSeriesIndex(s); i > 0 {
		filter = fmt.Sprintf("vi = %d", i)
	}
	return []string{
		fmt.Sprintf("NULLIF(count(*) FILTER (WHERE %[2]s), 0) AS %[1]s_trades", s, filter),
		fmt.Sprintf("sum(size) FILTER (WHERE %[2]s) AS %[1]s_volume", s, filter),
		fmt.Sprintf("min(ARRAY[rank, n, price]) FILTER (WHERE %[2]s) AS %[1]s_open", s, filter),
		fmt.Sprintf("max(ARRAY[rank, n, price]) FILTER (WHERE %[2]s) AS %[1]s_close", s, filter),
		fmt.Sprintf("max(price) FILTER (WHERE %[2]s) AS %[1]s_high", s, filter),
		fmt.Sprintf("min(price) FILTER (WHERE %[2]s) AS %[1]s_low", s, filter),
	}
}

// tradeSources turn tagg's columns for series s into candleTradeColumns(s).
func tradeSources(s string) []string {
	out := []string{s + "_trades", s + "_volume"}
	for _, g := range []string{"open", "close"} {
		pos := fmt.Sprintf("(%s_%s)[2]::int", s, g)
		out = append(out, "({t7}::timestamptz[])["+pos+"]", "({t1}::text[])["+pos+"]", fmt.Sprintf("(%s_%s)[3]", s, g))
	}
	return append(out, s+"_high", s+"_low")
}

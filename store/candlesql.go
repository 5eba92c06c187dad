package store

import (
	"strconv"
	"strings"
)

// The batch statement writes a batch's prices and trades and queues the
// candle points and trades they make (migration 008), in one statement (so a
// prices-only batch stays one round trip). Its common table expressions all
// see the snapshot taken before the statement, so "above the version stored
// before the batch" and "inserted now, not a redelivery" are decided in SQL:
//
//	u, up   the prices, deduplicated, upserted as before;
//	r       each price's market document (rev, deps stamp), the market and
//	        event rows where the document's deps stamp differs from the
//	        process's cached one, and the venues' modes (candle_modes): from
//	        the cached market row when its stamp is still the stored one;
//	pt      every price message of the batch (before deduplication), its
//	        series computed by ingest from the modes it holds;
//	cp      queues the points whose market's price was written and whose
//	        version is above the one stored before: as sent where r's modes
//	        are the ones ingest used, requoted (candle_requote) where not,
//	        as one row of arrays (candle_point_batches, migration 009);
//	t, ins  the trades, inserted as before;
//	tm, tv  each trade's market's modes, as r, and the trades inserted now
//	        in the market's terms;
//	ct      queues them.
//
// The main query reads the price documents as the statement before candles
// did (see pricebatch.go).

// pricesPart is the prices' CTEs; {pN} are its parameters. r's (and
// docsQuery's) conditional reads are LATERAL lookups whose condition on the
// outer row comes first: Postgres tests it before touching the index. LIMIT 1
// (each is a primary-key lookup anyway) keeps the planner from flattening
// them back into joins, so each can only be a lookup per row. As plain joins
// (a NULL join key for "not needed"), a batch of 1,000 on a 250,000-market
// world was planned as a hash join over all of prices: 164 ms of a 190 ms
// statement (TestPriceDocsReadsByKey).
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
    LEFT JOIN LATERAL (
        SELECT * FROM markets m WHERE d.deps <> u.cached AND m.universal_id = u.market_id LIMIT 1
    ) m ON true
    LEFT JOIN LATERAL (SELECT * FROM events e WHERE e.universal_id = m.event_id LIMIT 1) e ON true
)`

// pointsPart queues the points (see above).
const pointsPart = `pt AS (
    SELECT *
    FROM unnest({p7}::text[], {p8}::bigint[], {p9}::timestamptz[], {p10}::bool[], {p11}::int[], {p12}::text[],
                {p13}::float8[], {p14}::float8[], {p15}::float8[], {p16}::float8[], {p17}::float8[],
                {p18}::float8[], {p19}::float8[], {p20}::float8[], {p21}::float8[], {p22}::float8[])
        AS pt(market_id, version, ts, multi, present, modes,
              all_bid, all_ask, a_bid, a_ask, b_bid, b_ask, c_bid, c_ask, d_bid, d_ask)
), pv AS (
    SELECT pt.*, r.modes AS now_modes
    FROM pt
    JOIN up ON up.market_id = pt.market_id
    JOIN r ON r.market_id = pt.market_id
    -- The stored version matters only for a market with several points in
    -- the batch: a single one counts exactly when its price was written.
    WHERE NOT pt.multi
       OR pt.version > COALESCE((SELECT p0.version FROM prices p0 WHERE p0.market_id = pt.market_id), 0)
), cp AS (
    -- One row for the statement's points (migration 009), none when it has
    -- none; a point whose modes turned out stale is requoted.
    INSERT INTO candle_point_batches
    SELECT array_agg(market_id), array_agg(ts), array_agg(version), array_agg(present),
           array_agg(CASE WHEN q IS NULL THEN all_bid ELSE q[1] END),
           array_agg(CASE WHEN q IS NULL THEN all_ask ELSE q[2] END),
           array_agg(CASE WHEN q IS NULL THEN a_bid ELSE q[3] END),
           array_agg(CASE WHEN q IS NULL THEN a_ask ELSE q[4] END),
           array_agg(CASE WHEN q IS NULL THEN b_bid ELSE q[5] END),
           array_agg(CASE WHEN q IS NULL THEN b_ask ELSE q[6] END),
           array_agg(CASE WHEN q IS NULL THEN c_bid ELSE q[7] END),
           array_agg(CASE WHEN q IS NULL THEN c_ask ELSE q[8] END),
           array_agg(CASE WHEN q IS NULL THEN d_bid ELSE q[9] END),
           array_agg(CASE WHEN q IS NULL THEN d_ask ELSE q[10] END)
    FROM (
        SELECT pv.*, CASE WHEN modes <> now_modes
                          THEN candle_requote(modes, now_modes, ARRAY[a_bid, a_ask, b_bid, b_ask, c_bid, c_ask, d_bid, d_ask])
                     END AS q
        FROM pv
    ) s
    HAVING count(*) > 0
)`

// tradesPart is the trades' CTEs; {tN} are its parameters.
const tradesPart = `t AS (
    SELECT *
    FROM unnest({t1}::text[], {t2}::text[], {t3}::text[], {t4}::float8[], {t5}::float8[],
                {t6}::text[], {t7}::timestamptz[], {t8}::int[])
        AS t(trade_id, market_id, venue, price, size, side, ts, vi)
), ins AS (
    INSERT INTO trades (trade_id, market_id, venue, price, size, side, ts)
    SELECT t.trade_id, t.market_id, t.venue, t.price, t.size, t.side, t.ts
    FROM t
    ON CONFLICT (trade_id) DO NOTHING
    RETURNING trade_id
), tm AS (
    SELECT tm.market_id,
           CASE WHEN d.deps IS DISTINCT FROM tm.cached THEN candle_modes(m.matches) ELSE tm.modes END AS modes
    FROM unnest({t9}::text[], {t10}::bigint[], {t11}::text[]) AS tm(market_id, cached, modes)
    LEFT JOIN doc_revs d ON d.doc = 'm:' || tm.market_id
    LEFT JOIN LATERAL (
        SELECT * FROM markets m
        WHERE d.deps IS DISTINCT FROM tm.cached AND m.universal_id = tm.market_id LIMIT 1
    ) m ON true
), ct AS (
    INSERT INTO candle_trades_new (market_id, ts, trade_id, venue, price, size, counts)
    SELECT t.market_id, t.ts, t.trade_id, t.vi,
           CASE substr(tm.modes, t.vi, 1) WHEN 'i' THEN 1 - t.price ELSE t.price END,
           t.size, substr(tm.modes, t.vi, 1) <> 'x'
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
LEFT JOIN LATERAL (
    SELECT * FROM prices p WHERE up.market_id IS NULL AND p.market_id = r.market_id LIMIT 1
) p ON true`

// pricesParams and tradesParams are how many parameters each part takes.
const (
	pricesParams = 22
	tradesParams = 11
)

// batchStatements are the batch statement for each shape of batch, by [has
// prices][has trades], and whether they queue candles (their parameters do
// not include the points' and the trades' modes otherwise).
type batchStatements struct {
	sql     [2][2]string
	candles bool
}

func newBatchStatements(candles bool) *batchStatements {
	return &batchStatements{sql: [2][2]string{
		{"", buildBatchSQL(false, true, candles)},
		{buildBatchSQL(true, false, candles), buildBatchSQL(true, true, candles)},
	}, candles: candles}
}

// Without candles, the prices take their first pricesPlainParams parameters
// and the trades their first tradesPlainParams.
const (
	pricesPlainParams = 6
	tradesPlainParams = 8
)

// defaultBatchStatements are the statements ingest runs.
var defaultBatchStatements = newBatchStatements(true)

// buildBatchSQL writes the batch statement for a batch with prices, trades
// or both; without candles it queues no candle point or trade (what
// TestCandleCost compares against).
func buildBatchSQL(prices, trades, candles bool) string {
	var parts []string
	if prices {
		parts = append(parts, pricesPart)
		if candles {
			parts = append(parts, pointsPart)
		}
	}
	if trades {
		tp := tradesPart
		if !candles {
			tp = tp[:strings.Index(tp, "), tm AS (")] + ")"
		}
		parts = append(parts, tp)
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
	switch {
	case prices && candles:
		base = pricesParams
	case prices:
		base = pricesPlainParams
	}
	for i := 1; i <= tradesParams; i++ {
		params = append(params, "{t"+strconv.Itoa(i)+"}", "$"+strconv.Itoa(base+i))
	}
	return strings.NewReplacer(params...).Replace(sql)
}

// presentBit is the bit of venue i in a point's present mask.
func presentBit(i int) int { return 1 << i }

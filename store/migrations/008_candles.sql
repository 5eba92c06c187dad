-- 008: candles, built by ingest from the price and trade messages it applies.
--
-- One row per market and bucket holds the state of every series of the
-- market: `all` (the cross-venue best bid and ask, and the trades of the
-- venues that count) and each venue's own, in this market's terms (a
-- complement venue inverted). Columns per series:
--
--   first_* / last_*   the bucket's first and last price point, by (ts,
--                      version): its time, version, bid and ask. A late
--                      point lands in the bucket of its own ts; first/last
--                      keep the value in force right, whatever the order of
--                      arrival.
--   bid_/ask_high, _low over the bucket's points.
--   trades, volume     count and sum of sizes of the trades (NULL: none).
--   trade_open_* / trade_close_*  the first and last trade by (ts, trade_id).
--   trade_high, trade_low.
--
-- The candle's open (the value in force when the bucket starts: the last
-- point of the latest bucket before) is found when reading, so a late point
-- fixes every later candle by itself. All of one row in one place: a price
-- update writes one row, not one per series (measured: docs/benchmarks.md).
--
-- candles_1m is partitioned by month on the bucket start. Ingest makes the
-- monthly partitions ahead (store.EnsureCandlePartitions); the default
-- partition takes a point whose month has none yet (a clock far off, a
-- message from long ago), so no message is ever refused for its ts. The
-- retention sweep moves the rows of months past the 1m retention into the
-- coarser tables and drops their partitions (store.SweepCandles).
CREATE TABLE candles_1m (
    market_id                text COLLATE "C" NOT NULL,
    bucket                   timestamptz      NOT NULL,
    -- all
    all_first_ts             timestamptz,
    all_first_version        bigint,
    all_first_bid            double precision,
    all_first_ask            double precision,
    all_last_ts              timestamptz,
    all_last_version         bigint,
    all_last_bid             double precision,
    all_last_ask             double precision,
    all_bid_high             double precision,
    all_bid_low              double precision,
    all_ask_high             double precision,
    all_ask_low              double precision,
    all_trades               integer,
    all_volume               double precision,
    all_trade_open_ts        timestamptz,
    all_trade_open_id        text COLLATE "C",
    all_trade_open           double precision,
    all_trade_close_ts       timestamptz,
    all_trade_close_id       text COLLATE "C",
    all_trade_close          double precision,
    all_trade_high           double precision,
    all_trade_low            double precision,
    -- venue_a
    venue_a_first_ts         timestamptz,
    venue_a_first_version    bigint,
    venue_a_first_bid        double precision,
    venue_a_first_ask        double precision,
    venue_a_last_ts          timestamptz,
    venue_a_last_version     bigint,
    venue_a_last_bid         double precision,
    venue_a_last_ask         double precision,
    venue_a_bid_high         double precision,
    venue_a_bid_low          double precision,
    venue_a_ask_high         double precision,
    venue_a_ask_low          double precision,
    venue_a_trades           integer,
    venue_a_volume           double precision,
    venue_a_trade_open_ts    timestamptz,
    venue_a_trade_open_id    text COLLATE "C",
    venue_a_trade_open       double precision,
    venue_a_trade_close_ts   timestamptz,
    venue_a_trade_close_id   text COLLATE "C",
    venue_a_trade_close      double precision,
    venue_a_trade_high       double precision,
    venue_a_trade_low        double precision,
    -- venue_b
    venue_b_first_ts         timestamptz,
    venue_b_first_version    bigint,
    venue_b_first_bid        double precision,
    venue_b_first_ask        double precision,
    venue_b_last_ts          timestamptz,
    venue_b_last_version     bigint,
    venue_b_last_bid         double precision,
    venue_b_last_ask         double precision,
    venue_b_bid_high         double precision,
    venue_b_bid_low          double precision,
    venue_b_ask_high         double precision,
    venue_b_ask_low          double precision,
    venue_b_trades           integer,
    venue_b_volume           double precision,
    venue_b_trade_open_ts    timestamptz,
    venue_b_trade_open_id    text COLLATE "C",
    venue_b_trade_open       double precision,
    venue_b_trade_close_ts   timestamptz,
    venue_b_trade_close_id   text COLLATE "C",
    venue_b_trade_close      double precision,
    venue_b_trade_high       double precision,
    venue_b_trade_low        double precision,
    -- venue_c
    venue_c_first_ts         timestamptz,
    venue_c_first_version    bigint,
    venue_c_first_bid        double precision,
    venue_c_first_ask        double precision,
    venue_c_last_ts          timestamptz,
    venue_c_last_version     bigint,
    venue_c_last_bid         double precision,
    venue_c_last_ask         double precision,
    venue_c_bid_high         double precision,
    venue_c_bid_low          double precision,
    venue_c_ask_high         double precision,
    venue_c_ask_low          double precision,
    venue_c_trades           integer,
    venue_c_volume           double precision,
    venue_c_trade_open_ts    timestamptz,
    venue_c_trade_open_id    text COLLATE "C",
    venue_c_trade_open       double precision,
    venue_c_trade_close_ts   timestamptz,
    venue_c_trade_close_id   text COLLATE "C",
    venue_c_trade_close      double precision,
    venue_c_trade_high       double precision,
    venue_c_trade_low        double precision,
    -- venue_d
    venue_d_first_ts         timestamptz,
    venue_d_first_version    bigint,
    venue_d_first_bid        double precision,
    venue_d_first_ask        double precision,
    venue_d_last_ts          timestamptz,
    venue_d_last_version     bigint,
    venue_d_last_bid         double precision,
    venue_d_last_ask         double precision,
    venue_d_bid_high         double precision,
    venue_d_bid_low          double precision,
    venue_d_ask_high         double precision,
    venue_d_ask_low          double precision,
    venue_d_trades           integer,
    venue_d_volume           double precision,
    venue_d_trade_open_ts    timestamptz,
    venue_d_trade_open_id    text COLLATE "C",
    venue_d_trade_open       double precision,
    venue_d_trade_close_ts   timestamptz,
    venue_d_trade_close_id   text COLLATE "C",
    venue_d_trade_close      double precision,
    venue_d_trade_high       double precision,
    venue_d_trade_low        double precision,    PRIMARY KEY (market_id, bucket)
) PARTITION BY RANGE (bucket);

-- Rows of the current minute are rewritten by every update of their market:
-- free space in each page keeps those updates HOT, as for prices.
CREATE TABLE candles_1m_default PARTITION OF candles_1m DEFAULT WITH (fillfactor = 70);

-- Coarser buckets, kept as long as the market: the sweep moves 1m rows into
-- them before it drops their month. Reads fold the 1m rows still kept into
-- these (15m from 5m, 4h from 1h), so each row is counted in one place only.
CREATE TABLE candles_5m (LIKE candles_1m INCLUDING DEFAULTS, PRIMARY KEY (market_id, bucket));
CREATE TABLE candles_1h (LIKE candles_1m INCLUDING DEFAULTS, PRIMARY KEY (market_id, bucket));
CREATE TABLE candles_1d (LIKE candles_1m INCLUDING DEFAULTS, PRIMARY KEY (market_id, bucket));

-- candle_modes gives, for a market's match metadata (markets.matches), one
-- character per venue in store.Venues order: 'n' counts as quoted (identity
-- or no metadata), 'i' counts inverted (complement), 'x' does not count in
-- the cross-venue series (subset, superset, overlap). Ingest computes the
-- same from the market row it holds in memory (store.candleModes) and asks
-- Postgres only when that row is stale. The metadata may be an object keyed
-- by venue or an array in venue order.
CREATE FUNCTION candle_modes(matches json) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT string_agg(
               CASE r.relation
                   WHEN 'complement' THEN 'i'
                   WHEN 'subset' THEN 'x'
                   WHEN 'superset' THEN 'x'
                   WHEN 'overlap' THEN 'x'
                   ELSE 'n'
               END, '' ORDER BY v.i)
    FROM (VALUES (1, 'venue_a'), (2, 'venue_b'), (3, 'venue_c'), (4, 'venue_d')) AS v(i, venue)
    CROSS JOIN LATERAL (
        SELECT CASE json_typeof(matches)
                   WHEN 'array' THEN matches -> (v.i - 1)
                   WHEN 'object' THEN matches -> v.venue
               END ->> 'relation' AS relation
    ) r
$$;

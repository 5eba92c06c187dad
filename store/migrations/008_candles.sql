-- 008: candles, built by ingest from the price and trade messages it applies.
--
-- Ingest writes, in the transaction that applies them, one narrow row per
-- price point (every applied price message: the market's series after it)
-- and one per trade inserted now, into two queues (candle_points_new,
-- candle_trades_new): plain inserts into unindexed tables, the cheapest
-- write there is (docs/benchmarks.md, "Candles storage"). About once a
-- second ingest folds the queues (store.FoldCandles), one folder at a time
-- (candle_fold's row lock): in one transaction it deletes what it takes
-- from them and appends it to candle_points and candle_trades (the 1m
-- store, partitioned by month); then it closes the next 5m bucket that
-- ended a minute ago: its candles_5m rows are built from the store's rows
-- of the bucket and merged into its candles_1h and candles_1d rows. The
-- coarse tables hold exactly what came before candle_fold.closed: a row
-- taken from a queue with a ts before it (late) merges into them at once.
-- A row is in a queue or in the store, and in the coarse tables once, never
-- twice, whatever the number of folders or where one stops.
--
-- Reads: 1m candles are computed from the points and trades of their range
-- (kept 30 days: dropping a month's partition is the sweep) and the queues';
-- 5m and 15m from candles_5m, 1h and 4h from candles_1h, 1d from
-- candles_1d, each with the store's rows from the mark on and the queues'.
-- The candle's open (the value in force when the bucket starts: the last
-- point before it) is found when reading, so a late point fixes every later
-- candle by itself.
--
-- A point holds the market's series after its price message: the
-- cross-venue best bid and ask over the venues that count (all_bid,
-- all_ask) and each venue's bid and ask in this market's terms (a complement
-- venue inverted); present has bit i set when venue i was quoted.
CREATE TABLE candle_points (
    market_id text COLLATE "C" NOT NULL,
    ts        timestamptz      NOT NULL,
    version   bigint           NOT NULL,
    present   int              NOT NULL,
    all_bid   double precision,
    all_ask   double precision,
    a_bid     double precision,
    a_ask     double precision,
    b_bid     double precision,
    b_ask     double precision,
    c_bid     double precision,
    c_ask     double precision,
    d_bid     double precision,
    d_ask     double precision
) PARTITION BY RANGE (ts);
CREATE INDEX candle_points_market_ts ON candle_points (market_id, ts);
-- The fold closes the 5m buckets of every market at once: a range of ts. A
-- btree, not a BRIN: a BRIN finds nothing until a vacuum summarizes it, and
-- ts mostly grows, so its inserts land at the right edge.
CREATE INDEX candle_points_ts ON candle_points (ts);

-- A trade in this market's terms: price inverted for a complement venue;
-- counts is whether it counts in the cross-venue series; venue is the
-- venue's position in store.Venues, from 1.
CREATE TABLE candle_trades (
    market_id text COLLATE "C" NOT NULL,
    ts        timestamptz      NOT NULL,
    trade_id  text COLLATE "C" NOT NULL,
    venue     smallint         NOT NULL,
    price     double precision NOT NULL,
    size      double precision NOT NULL,
    counts    boolean          NOT NULL
) PARTITION BY RANGE (ts);
CREATE INDEX candle_trades_market_ts ON candle_trades (market_id, ts);
CREATE INDEX candle_trades_ts ON candle_trades (ts);

-- Ingest makes the monthly partitions ahead (store.EnsureCandlePartitions);
-- the default partitions take a row whose month has none (a clock far off,
-- a message from long ago), so no message is ever refused for its ts.
CREATE TABLE candle_points_default PARTITION OF candle_points DEFAULT;
CREATE TABLE candle_trades_default PARTITION OF candle_trades DEFAULT;

-- The fold's marks (NULL: none yet): candles_5m holds exactly the points
-- and trades before closed (a 5m boundary), candles_1h those before hours
-- (closed's hour), candles_1d those before days (hours' day).
CREATE TABLE candle_fold (
    one    boolean PRIMARY KEY DEFAULT true CHECK (one),
    closed timestamptz,
    hours  timestamptz,
    days   timestamptz
);
INSERT INTO candle_fold DEFAULT VALUES;

-- The queues: what ingest applied and the fold has not taken yet. The fold
-- empties them and vacuums them every second; a vacuum never truncates
-- them, which would take a lock that holds ingest's inserts.
CREATE TABLE candle_points_new (LIKE candle_points) WITH (vacuum_truncate = false);
CREATE TABLE candle_trades_new (LIKE candle_trades) WITH (vacuum_truncate = false);

-- The coarse tables, kept as long as the market: one row per market and
-- bucket holds the state of every series of the market: `all` (the
-- cross-venue best bid and ask, and the trades of the venues that count)
-- and each venue's own. Columns per series:
--
--   first_* / last_*   the bucket's first and last price point, by (ts,
--                      version): its time, version, bid and ask.
--   bid_/ask_high, _low over the bucket's points.
--   trades, volume     count and sum of sizes of the trades (NULL: none).
--   trade_open_* / trade_close_*  the first and last trade by (ts, trade_id).
--   trade_high, trade_low.
--
-- A late row rewrites a closed bucket's row, and each closed 5m bucket
-- rewrites its hour's and day's: free space in each page keeps those updates
-- HOT.
CREATE TABLE candles_5m (
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
    venue_d_trade_low        double precision,
    PRIMARY KEY (market_id, bucket)
) WITH (fillfactor = 70);
CREATE TABLE candles_1h (LIKE candles_5m INCLUDING DEFAULTS, PRIMARY KEY (market_id, bucket)) WITH (fillfactor = 70);
-- The fold rolls an hour's 5m rows (a day's 1h rows) up: a range of buckets.
CREATE INDEX candles_5m_bucket ON candles_5m (bucket);
CREATE INDEX candles_1h_bucket ON candles_1h (bucket);
CREATE TABLE candles_1d (LIKE candles_5m INCLUDING DEFAULTS, PRIMARY KEY (market_id, bucket)) WITH (fillfactor = 70);

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

-- candle_requote turns a point's venue values v (a_bid, a_ask, …, d_ask),
-- written under the venues' modes was, into the same point under the modes
-- now, and returns all_bid, all_ask, then the venue values: ingest computes
-- a point from the modes of the market row it holds in memory, and the
-- batch statement calls this only where that row turned out stale.
CREATE FUNCTION candle_requote(was text, now text, v double precision[]) RETURNS double precision[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    out double precision[] := array_fill(NULL::double precision, ARRAY[10]);
    bid double precision;
    ask double precision;
    raw_bid double precision;
    raw_ask double precision;
BEGIN
    FOR i IN 1..4 LOOP
        bid := v[2 * i - 1];
        ask := v[2 * i];
        IF substr(was, i, 1) = 'i' THEN
            raw_bid := 1 - ask;
            raw_ask := 1 - bid;
        ELSE
            raw_bid := bid;
            raw_ask := ask;
        END IF;
        IF substr(now, i, 1) = 'i' THEN
            bid := 1 - raw_ask;
            ask := 1 - raw_bid;
        ELSE
            bid := raw_bid;
            ask := raw_ask;
        END IF;
        out[2 + 2 * i - 1] := bid;
        out[2 + 2 * i] := ask;
        IF substr(now, i, 1) <> 'x' THEN
            out[1] := GREATEST(out[1], bid);
            out[2] := LEAST(out[2], ask);
        END IF;
    END LOOP;
    RETURN out;
END
$$;

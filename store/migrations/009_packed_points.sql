-- 009: the points queue takes a batch statement's points as one row.
--
-- Ingest queued one candle_points_new row per applied price message: at
-- 5,000 updates a second that is 5,000 heap inserts a second, each with its
-- WAL record, deleted again by the fold a second later and vacuumed
-- (docs/benchmarks.md, "2026-11-28 evening": a few µs of the ~28 µs candles
-- cost an update under the poll load). A batch statement now queues its points as one row of
-- candle_point_batches, one array per column of candle_points, in the same
-- order in every array; the fold unnests them into the 1m store.
--
-- candle_points_new stays, and the fold and reads take it as before: an
-- ingest process of an older release (a rolling upgrade) still writes
-- there, and nothing it queued is lost or counted twice. Reads take the
-- batches through candle_point_batch_rows, their rows as candle_points_new's.
--
-- The arrays are stored out of line uncompressed (EXTERNAL): a batch of 200
-- points is ~20 kB, and compressing float arrays costs more CPU than the
-- few bytes it saves for a row that lives a second. Each array is one TOAST
-- value (a chunk and its index entry, an OID from the cluster's counter):
-- ~14 a batch statement instead of a heap row and WAL record a point.
--
-- Reads find the batches holding a market by `$1 = ANY(market_id)` before
-- unnesting any (store.queuedBatchPoints); the view below is for people.
CREATE TABLE candle_point_batches (
    market_id text[] COLLATE "C" NOT NULL,
    ts        timestamptz[]      NOT NULL,
    version   bigint[]           NOT NULL,
    present   int[]              NOT NULL,
    all_bid   double precision[] NOT NULL,
    all_ask   double precision[] NOT NULL,
    a_bid     double precision[] NOT NULL,
    a_ask     double precision[] NOT NULL,
    b_bid     double precision[] NOT NULL,
    b_ask     double precision[] NOT NULL,
    c_bid     double precision[] NOT NULL,
    c_ask     double precision[] NOT NULL,
    d_bid     double precision[] NOT NULL,
    d_ask     double precision[] NOT NULL
) WITH (vacuum_truncate = false);
ALTER TABLE candle_point_batches
    ALTER COLUMN market_id SET STORAGE EXTERNAL,
    ALTER COLUMN ts SET STORAGE EXTERNAL,
    ALTER COLUMN version SET STORAGE EXTERNAL,
    ALTER COLUMN present SET STORAGE EXTERNAL,
    ALTER COLUMN all_bid SET STORAGE EXTERNAL,
    ALTER COLUMN all_ask SET STORAGE EXTERNAL,
    ALTER COLUMN a_bid SET STORAGE EXTERNAL,
    ALTER COLUMN a_ask SET STORAGE EXTERNAL,
    ALTER COLUMN b_bid SET STORAGE EXTERNAL,
    ALTER COLUMN b_ask SET STORAGE EXTERNAL,
    ALTER COLUMN c_bid SET STORAGE EXTERNAL,
    ALTER COLUMN c_ask SET STORAGE EXTERNAL,
    ALTER COLUMN d_bid SET STORAGE EXTERNAL,
    ALTER COLUMN d_ask SET STORAGE EXTERNAL;

-- The queued batches' points, as rows of candle_points.
CREATE VIEW candle_point_batch_rows AS
SELECT p.*
FROM candle_point_batches b
CROSS JOIN LATERAL unnest(b.market_id, b.ts, b.version, b.present, b.all_bid, b.all_ask,
                          b.a_bid, b.a_ask, b.b_bid, b.b_ask, b.c_bid, b.c_ask, b.d_bid, b.d_ask)
    AS p(market_id, ts, version, present, all_bid, all_ask, a_bid, a_ask, b_bid, b_ask, c_bid, c_ask, d_bid, d_ask);

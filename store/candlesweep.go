package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// CandleRetention is how long 1m candles are kept at least (contract §3): a
// month's partition is dropped once its last minute is that old.
const CandleRetention = 30 * 24 * time.Hour

// candleMonthsAhead is how many months after the current one get their
// partition ahead of time.
const candleMonthsAhead = 2

// candlePartitionLock serializes the processes that make partitions (an
// advisory lock key: arbitrary, constant).
const candlePartitionLock = 7262932

// candleCoarse are the tables the sweep moves 1m rows into, with their steps.
var candleCoarse = []struct {
	table string
	step  time.Duration
}{{"candles_5m", 5 * time.Minute}, {"candles_1h", time.Hour}, {"candles_1d", 24 * time.Hour}}

// candleMoveChunk is how many 1m rows one transaction of the sweep moves.
const candleMoveChunk = 2000

// monthStart is the first instant of t's month, UTC.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// candlePartition is the name of the partition of the month starting at m.
func candlePartition(m time.Time) string {
	return fmt.Sprintf("candles_1m_%04d%02d", m.Year(), int(m.Month()))
}

// EnsureCandlePartitions makes the monthly partitions of candles_1m from the
// month that holds now − CandleRetention (a late point still lands in a
// partition of its own) through the second month after now's, and returns
// the ones it made. Rows the default partition took for a new partition's
// month move into it. It is idempotent and safe to run from several
// processes at once: each partition is made under an advisory lock, after
// looking again.
func (s *Store) EnsureCandlePartitions(ctx context.Context, now time.Time) ([]string, error) {
	var made []string
	last := monthStart(now).AddDate(0, candleMonthsAhead, 0)
	for m := monthStart(now.Add(-CandleRetention)); !m.After(last); m = m.AddDate(0, 1, 0) {
		ok, err := s.makeCandlePartition(ctx, m)
		if err != nil {
			return made, err
		}
		if ok {
			made = append(made, candlePartition(m))
		}
	}
	return made, nil
}

// makeCandlePartition makes the partition of the month starting at m unless
// it exists; true when it made it.
func (s *Store) makeCandlePartition(ctx context.Context, m time.Time) (bool, error) {
	name := candlePartition(m)
	var made bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		made = false
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, candlePartitionLock); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		// Attaching scans the default partition and locks it: wait for it
		// briefly, and try again at the next run rather than hold ingest.
		from, to := m.Format(time.RFC3339), m.AddDate(0, 1, 0).Format(time.RFC3339)
		for _, stmt := range []string{
			`SET LOCAL lock_timeout = '5s'`,
			`CREATE TABLE ` + name + ` (LIKE candles_1m INCLUDING DEFAULTS) WITH (fillfactor = 70)`,
			`WITH moved AS (
			    DELETE FROM candles_1m_default
			    WHERE bucket >= '` + from + `' AND bucket < '` + to + `'
			    RETURNING *)
			INSERT INTO ` + name + ` SELECT * FROM moved`,
			`ALTER TABLE candles_1m ATTACH PARTITION ` + name + ` FOR VALUES FROM ('` + from + `') TO ('` + to + `')`,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		made = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: make candle partition %s: %w", name, err)
	}
	return made, nil
}

// CandleSweep is what one SweepCandles did.
type CandleSweep struct {
	// Moved counts the 1m rows moved into the coarser tables.
	Moved int
	// Dropped names the partitions dropped.
	Dropped []string
}

// SweepCandles ends the 1m retention of the months before the one holding
// now − CandleRetention: it moves their 1m rows (and any the default
// partition holds for them) into the 5m, 1h and 1d tables, which keep them
// as long as the market, then drops their partitions. Rows move in chunks,
// each in a transaction that deletes them from candles_1m and merges them
// into the coarse tables, so every row moves exactly once, however many
// processes sweep and wherever one stops; reads see each row in one of the
// two places, never both.
func (s *Store) SweepCandles(ctx context.Context, now time.Time) (CandleSweep, error) {
	var out CandleSweep
	cut := monthStart(now.Add(-CandleRetention))
	for {
		var n int
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			n, err = moveCandles(ctx, tx, cut, true)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("store: move 1m candles before %s: %w", cut.Format(time.RFC3339), err)
		}
		out.Moved += n
		if n < candleMoveChunk {
			break
		}
	}
	rows, err := s.pool.Query(ctx, `
		SELECT c.relname
		FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'candles_1m'::regclass AND c.relname ~ '^candles_1m_[0-9]{6}$'`)
	if err != nil {
		return out, fmt.Errorf("store: list candle partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return out, fmt.Errorf("store: list candle partitions: %w", err)
	}
	slices.Sort(names)
	for _, name := range names {
		if name >= candlePartition(cut) {
			break
		}
		n, dropped, err := s.dropCandlePartition(ctx, name, cut)
		out.Moved += n
		if err != nil {
			return out, err
		}
		if dropped {
			out.Dropped = append(out.Dropped, name)
		}
	}
	return out, nil
}

// dropCandlePartition drops a partition whose rows were moved, unless
// another sweep did first (false). A late point may have landed in it since:
// with candles_1m locked (ingest's candle writes wait a moment), what is left
// moves, then the partition goes.
func (s *Store) dropCandlePartition(ctx context.Context, name string, cut time.Time) (int, bool, error) {
	moved, dropped := 0, false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		moved, dropped = 0, false
		for _, stmt := range []string{
			`SET LOCAL lock_timeout = '5s'`,
			`LOCK TABLE candles_1m IN ACCESS EXCLUSIVE MODE`,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil || !exists {
			return err
		}
		for {
			n, err := moveCandles(ctx, tx, cut, false)
			moved += n
			if err != nil {
				return err
			}
			if n < candleMoveChunk {
				break
			}
		}
		_, err := tx.Exec(ctx, `DROP TABLE `+name)
		dropped = err == nil
		return err
	})
	if err != nil {
		return moved, false, fmt.Errorf("store: drop candle partition %s: %w", name, err)
	}
	return moved, dropped, nil
}

// moveCandlesSQL deletes up to $2 of the 1m rows before $1, in key order, and
// returns them. With skip, rows another sweep holds are left to it.
const moveCandlesSQL = `
	DELETE FROM candles_1m c
	USING (
	    SELECT market_id, bucket
	    FROM candles_1m
	    WHERE bucket < $1
	    ORDER BY market_id, bucket
	    LIMIT $2
	    FOR UPDATE%s
	) k
	WHERE c.market_id = k.market_id AND c.bucket = k.bucket
	RETURNING c.market_id, c.bucket, %s`

// moveCandles moves one chunk of 1m rows before cut into the coarse tables,
// in tx, and returns how many it moved.
func moveCandles(ctx context.Context, tx pgx.Tx, cut time.Time, skip bool) (int, error) {
	lock := ""
	if skip {
		lock = " SKIP LOCKED"
	}
	cols := make([]string, len(candleColumnsAll))
	for i, c := range candleColumnsAll {
		cols[i] = "c." + c
	}
	rows, err := tx.Query(ctx, fmt.Sprintf(moveCandlesSQL, lock, strings.Join(cols, ", ")), cut, candleMoveChunk)
	if err != nil {
		return 0, err
	}
	var fine []candleRow
	var row candleRow
	var scans [len(CandleSeries)]seriesScan
	dest := []any{&row.marketID, &row.bucket}
	for k := range scans {
		dest = append(dest, scans[k].dest()...)
	}
	if _, err := pgx.ForEachRow(rows, dest, func() error {
		r := candleRow{marketID: row.marketID, bucket: row.bucket.UTC()}
		for k := range scans {
			r.series[k] = scans[k].state()
		}
		fine = append(fine, r)
		return nil
	}); err != nil {
		return 0, err
	}
	if len(fine) == 0 {
		return 0, nil
	}
	for _, c := range candleCoarse {
		if _, err := tx.Exec(ctx, coarseUpsertSQL(c.table), candleRowArgs(foldCandles(fine, c.step))...); err != nil {
			return 0, fmt.Errorf("merge into %s: %w", c.table, err)
		}
	}
	return len(fine), nil
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

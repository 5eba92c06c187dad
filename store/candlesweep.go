package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// CandleRetention is how long 1m candles are kept at least (contract §3): a
// month's partitions of candle_points and candle_trades are dropped once
// its last minute is that old.
const CandleRetention = 30 * 24 * time.Hour

// candleMonthsAhead is how many months after the current one get their
// partition ahead of time.
const candleMonthsAhead = 2

// candlePartitionLock serializes the processes that make or drop partitions
// (an advisory lock key: arbitrary, constant).
const candlePartitionLock = 7262932

// candleFineTables are the partitioned tables of the 1m store and the
// column each is partitioned on.
var candleFineTables = []string{"candle_points", "candle_trades"}

// monthStart is the first instant of t's month, UTC.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// candlePartition is the name of table's partition of the month starting at m.
func candlePartition(table string, m time.Time) string {
	return fmt.Sprintf("%s_%04d%02d", table, m.Year(), int(m.Month()))
}

// EnsureCandlePartitions makes the monthly partitions of candle_points and
// candle_trades from the month that holds now − CandleRetention (a late
// point still lands in a partition of its own) through the second month
// after now's, and returns the ones it made. Rows a default partition took
// for a new partition's month move into it. It is idempotent and safe to run
// from several processes at once: each partition is made under an advisory
// lock, after looking again.
func (s *Store) EnsureCandlePartitions(ctx context.Context, now time.Time) ([]string, error) {
	var made []string
	last := monthStart(now).AddDate(0, candleMonthsAhead, 0)
	for m := monthStart(now.Add(-CandleRetention)); !m.After(last); m = m.AddDate(0, 1, 0) {
		for _, table := range candleFineTables {
			ok, err := s.makeCandlePartition(ctx, table, m)
			if err != nil {
				return made, err
			}
			if ok {
				made = append(made, candlePartition(table, m))
			}
		}
	}
	return made, nil
}

// makeCandlePartition makes table's partition of the month starting at m
// unless it exists; true when it made it.
func (s *Store) makeCandlePartition(ctx context.Context, table string, m time.Time) (bool, error) {
	name := candlePartition(table, m)
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
			`CREATE TABLE ` + name + ` (LIKE ` + table + ` INCLUDING DEFAULTS)`,
			`WITH moved AS (
			    DELETE FROM ` + table + `_default
			    WHERE ts >= '` + from + `' AND ts < '` + to + `'
			    RETURNING *)
			INSERT INTO ` + name + ` SELECT * FROM moved`,
			`ALTER TABLE ` + table + ` ATTACH PARTITION ` + name + ` FOR VALUES FROM ('` + from + `') TO ('` + to + `')`,
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
	// Deleted counts the rows past the 1m retention deleted from the
	// default partitions.
	Deleted int
	// Dropped names the partitions dropped.
	Dropped []string
}

// SweepCandles ends the 1m retention of the months before the one holding
// now − CandleRetention: it drops their partitions of candle_points and
// candle_trades, and deletes what the default partitions hold from before
// that month. Nothing moves: the coarse tables took every point and trade
// before the fold's mark (FoldCandles), and no month the mark has not passed
// goes.
func (s *Store) SweepCandles(ctx context.Context, now time.Time) (CandleSweep, error) {
	var out CandleSweep
	cut := monthStart(now.Add(-CandleRetention))
	// Nothing the fold has not closed goes: the coarse tables do not have it.
	var mark *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT closed FROM candle_fold`).Scan(&mark); err != nil {
		return out, fmt.Errorf("store: read the candle fold's mark: %w", err)
	}
	if mark == nil {
		return out, nil
	}
	if m := monthStart(*mark); m.Before(cut) {
		cut = m
	}
	for _, table := range candleFineTables {
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+table+`_default WHERE ts < $1`, cut)
		if err != nil {
			return out, fmt.Errorf("store: delete %s before %s: %w", table, cut.Format(time.RFC3339), err)
		}
		out.Deleted += int(tag.RowsAffected())
		rows, err := s.pool.Query(ctx, `
			SELECT c.relname
			FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = $1::regclass AND c.relname ~ '_[0-9]{6}$'`, table)
		if err != nil {
			return out, fmt.Errorf("store: list partitions of %s: %w", table, err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return out, fmt.Errorf("store: list partitions of %s: %w", table, err)
		}
		slices.Sort(names)
		for _, name := range names {
			if name >= candlePartition(table, cut) {
				break
			}
			dropped, err := s.dropCandlePartition(ctx, name)
			if err != nil {
				return out, err
			}
			if dropped {
				out.Dropped = append(out.Dropped, name)
			}
		}
	}
	return out, nil
}

// dropCandlePartition drops a partition past the retention, unless another
// sweep did first (false).
func (s *Store) dropCandlePartition(ctx context.Context, name string) (bool, error) {
	dropped := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		dropped = false
		for _, stmt := range []string{
			`SET LOCAL lock_timeout = '5s'`,
			`SELECT pg_advisory_xact_lock(` + fmt.Sprint(candlePartitionLock) + `)`,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil || !exists {
			return err
		}
		_, err := tx.Exec(ctx, `DROP TABLE `+name)
		dropped = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: drop candle partition %s: %w", name, err)
	}
	return dropped, nil
}

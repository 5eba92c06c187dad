package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventsResolvedBetween lists the events with a market resolved in (from, to].
// The ingest sweeper refreshes them when their markets age out of retention.
func (s *Store) EventsResolvedBetween(ctx context.Context, from, to time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT event_id
		FROM markets
		WHERE resolved_at > $1 AND resolved_at <= $2`, from, to)
	if err != nil {
		return nil, fmt.Errorf("store: events resolved between %s and %s: %w", from, to, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: events resolved between %s and %s: %w", from, to, err)
	}
	return ids, nil
}

// SweepCursor is how far the retention sweep has come: markets resolved at
// or before it have been refreshed. ok is false before the first sweep.
func (s *Store) SweepCursor(ctx context.Context) (at time.Time, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT at FROM ingest_state WHERE name = 'retention_sweep'`).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: read sweep cursor: %w", err)
	}
	return at.UTC(), true, nil
}

// SetSweepCursor records how far the retention sweep has come; it never
// moves back.
func (s *Store) SetSweepCursor(ctx context.Context, at time.Time) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO ingest_state (name, at) VALUES ('retention_sweep', $1)
		ON CONFLICT (name) DO UPDATE SET at = GREATEST(ingest_state.at, EXCLUDED.at), updated_at = now()`, at)
	if err != nil {
		return fmt.Errorf("store: set sweep cursor: %w", err)
	}
	return nil
}

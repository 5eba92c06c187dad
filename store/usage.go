package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// UsageRetention is how long usage rows are kept: older days are swept.
const UsageRetention = 400 * 24 * time.Hour

// usageFlushRetention is how long a batch's id is remembered: a node that
// retries a batch whose commit it never heard does so within seconds.
const usageFlushRetention = 7 * 24 * time.Hour

// UsageCount is the number of requests an account made on one route on one
// UTC day. Day is that day's midnight, UTC.
type UsageCount struct {
	AccountID string
	Day       time.Time
	Route     string
	Count     int64
}

// AddUsage adds a batch of counts in one transaction, once: the batch's id
// is recorded with it, and a batch whose id is already recorded (a retry
// after a commit the caller never heard of) adds nothing. applied is false
// then. The batch must hold each (account, day, route) once; it is written
// in key order, so that nodes adding to the same rows at once never
// deadlock.
func (s *Store) AddUsage(ctx context.Context, flushID string, counts []UsageCount) (applied bool, err error) {
	counts = slices.Clone(counts)
	slices.SortFunc(counts, func(a, b UsageCount) int {
		if c := strings.Compare(a.AccountID, b.AccountID); c != 0 {
			return c
		}
		if c := a.Day.Compare(b.Day); c != 0 {
			return c
		}
		return strings.Compare(a.Route, b.Route)
	})
	accounts := make([]string, len(counts))
	days := make([]time.Time, len(counts))
	routes := make([]string, len(counts))
	ns := make([]int64, len(counts))
	for i, c := range counts {
		accounts[i], days[i], routes[i], ns[i] = c.AccountID, c.Day.UTC(), c.Route, c.Count
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO usage_flushes (flush_id) VALUES ($1)
			ON CONFLICT (flush_id) DO NOTHING`, flushID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		applied = true
		_, err = tx.Exec(ctx, `
			INSERT INTO usage (account_id, day, route, count)
			SELECT a, d, r, n
			FROM unnest($1::text[], $2::date[], $3::text[], $4::bigint[]) AS b (a, d, r, n)
			ORDER BY a, d, r
			ON CONFLICT (account_id, day, route) DO UPDATE
			SET count = usage.count + EXCLUDED.count`, accounts, days, routes, ns)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: add usage batch %s (%d counts): %w", flushID, len(counts), err)
	}
	return applied, nil
}

// UsageQuery selects an account's usage rows: days From to To (UTC dates,
// both included), one route or all (Route ""), after the position
// (AfterDay, AfterRoute) when AfterDay is set, at most Limit rows.
type UsageQuery struct {
	AccountID  string
	Route      string
	From, To   time.Time
	AfterDay   time.Time
	AfterRoute string
	Limit      int
}

// Usage lists an account's usage rows ascending by day, then route.
func (s *Store) Usage(ctx context.Context, q UsageQuery) ([]UsageCount, error) {
	from := q.From.UTC()
	if !q.AfterDay.IsZero() && q.AfterDay.After(from) {
		from = q.AfterDay.UTC()
	}
	rows, err := s.pool.Query(ctx, `
		SELECT account_id, day, route, count
		FROM usage
		WHERE account_id = $1
		  AND day BETWEEN $2::date AND $3::date
		  AND ($4 = '' OR route = $4)
		  AND ($5::date IS NULL OR (day, route) > ($5::date, $6::text))
		ORDER BY day, route
		LIMIT $7`,
		q.AccountID, from, q.To.UTC(), q.Route, nullDate(q.AfterDay), q.AfterRoute, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: usage of account %s: %w", q.AccountID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (UsageCount, error) {
		var c UsageCount
		err := r.Scan(&c.AccountID, &c.Day, &c.Route, &c.Count)
		c.Day = c.Day.UTC()
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: usage of account %s: %w", q.AccountID, err)
	}
	return out, nil
}

func nullDate(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// SweepUsage deletes the usage rows of days more than UsageRetention before
// now, and the batch ids older than a week (by the database's clock). It returns the usage rows
// deleted.
func (s *Store) SweepUsage(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM usage WHERE day < $1::date`, now.UTC().Add(-UsageRetention))
	if err != nil {
		return 0, fmt.Errorf("store: sweep usage: %w", err)
	}
	// By the database's clock, which stamped applied_at: a node whose clock
	// runs ahead must not drop ids a retry still needs.
	if _, err := s.pool.Exec(ctx, `DELETE FROM usage_flushes WHERE applied_at < now() - make_interval(secs => $1)`, usageFlushRetention.Seconds()); err != nil {
		return 0, fmt.Errorf("store: sweep usage batch ids: %w", err)
	}
	return tag.RowsAffected(), nil
}

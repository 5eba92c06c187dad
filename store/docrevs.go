package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reads of the cache's anti-entropy pass (ingest): it walks the document
// revisions in name order, a page at a time, and compares them and the
// newest trades with what Redis holds.

// DocRev is one cache document's current revision. Name is its row in
// doc_revs: "e:<event id>" or "m:<market id>".
type DocRev struct {
	Name string
	Rev  int64
}

// DocRevs reads up to limit document revisions whose names sort above after
// (bytewise; "" = from the first), in name order.
func (s *Store) DocRevs(ctx context.Context, after string, limit int) ([]DocRev, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT doc, rev
		FROM doc_revs
		WHERE doc > $1
		ORDER BY doc
		LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: read document revisions: %w", err)
	}
	revs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DocRev, error) {
		var d DocRev
		err := r.Scan(&d.Name, &d.Rev)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read document revisions: %w", err)
	}
	return revs, nil
}

// TradeWindow sums up a market's newest trades (at most the limit asked
// for): how many, and the times of the newest and the oldest of them.
type TradeWindow struct {
	N              int
	Newest, Oldest time.Time
}

// TradeWindows reads the window of the newest limit trades of each market
// in ids that has trades.
func (s *Store) TradeWindows(ctx context.Context, ids []string, limit int) (map[string]TradeWindow, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT m.id, w.n, w.newest, w.oldest
		FROM unnest($1::text[]) AS m(id)
		CROSS JOIN LATERAL (
		    SELECT count(*) AS n, max(x.ts) AS newest, min(x.ts) AS oldest
		    FROM (
		        SELECT t.ts
		        FROM trades t
		        WHERE t.market_id = m.id
		        ORDER BY t.ts DESC, t.trade_id DESC
		        LIMIT $2
		    ) x
		) w
		WHERE w.n > 0`, ids, limit)
	if err != nil {
		return nil, fmt.Errorf("store: read trade windows: %w", err)
	}
	out := make(map[string]TradeWindow, len(ids))
	var id string
	var w TradeWindow
	if _, err := pgx.ForEachRow(rows, []any{&id, &w.N, &w.Newest, &w.Oldest}, func() error {
		out[id] = TradeWindow{N: w.N, Newest: w.Newest.UTC(), Oldest: w.Oldest.UTC()}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: read trade windows: %w", err)
	}
	return out, nil
}

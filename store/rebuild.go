package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Snapshot is a consistent read-only view of the whole store, for rebuilding
// the cache. Close it when done.
type Snapshot struct {
	tx pgx.Tx
}

// Snapshot opens a repeatable-read view: every read through it sees the same
// committed state, and the revisions that go with it.
func (s *Store) Snapshot(ctx context.Context) (*Snapshot, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("store: begin snapshot: %w", err)
	}
	return &Snapshot{tx: tx}, nil
}

// Close ends the snapshot.
func (s *Snapshot) Close(ctx context.Context) error {
	return s.tx.Rollback(ctx)
}

// EventDocs calls fn for every event document that was ever written, in
// ascending id order, pageSize events at a time.
func (s *Snapshot) EventDocs(ctx context.Context, pageSize int, fn func(EventDoc) error) error {
	after := ""
	for {
		rows, err := s.tx.Query(ctx, `
			SELECT substr(doc, 3), rev
			FROM doc_revs
			WHERE doc LIKE 'e:%' AND doc COLLATE "C" > $1
			ORDER BY doc COLLATE "C"
			LIMIT $2`, "e:"+after, pageSize)
		if err != nil {
			return fmt.Errorf("store: list event documents: %w", err)
		}
		revs := map[string]int64{}
		var id string
		var rev int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &rev}, func() error {
			revs[id] = rev
			after = max(after, id)
			return nil
		}); err != nil {
			return fmt.Errorf("store: list event documents: %w", err)
		}
		if len(revs) == 0 {
			return nil
		}
		docs, err := readEventDocs(ctx, s.tx, revs)
		if err != nil {
			return err
		}
		for _, d := range docs {
			if err := fn(d); err != nil {
				return err
			}
		}
	}
}

// MarketDocs calls fn for every market document that was ever written, in
// ascending id order.
func (s *Snapshot) MarketDocs(ctx context.Context, fn func(MarketDoc) error) error {
	rows, err := s.tx.Query(ctx, `
		WITH docs AS (
		    SELECT substr(doc, 3) AS id, rev, false AS known FROM doc_revs WHERE doc LIKE 'm:%'
		)`+marketDocQuery)
	if err != nil {
		return fmt.Errorf("store: read market documents: %w", err)
	}
	if err := scanMarketDocs(rows, fn); err != nil {
		return fmt.Errorf("store: read market documents: %w", err)
	}
	return nil
}

// Trades calls fn for every market that has trades, with its newest trades
// (ts desc, then trade_id desc), at most limit of them.
func (s *Snapshot) Trades(ctx context.Context, limit int, fn func(marketID string, trades []Trade) error) error {
	rows, err := s.tx.Query(ctx, `
		SELECT trade_id, market_id, venue, price, size, side, ts
		FROM (
		    SELECT t.*, row_number() OVER (
		        PARTITION BY t.market_id ORDER BY t.ts DESC, t.trade_id COLLATE "C" DESC) AS n
		    FROM trades t
		) ranked
		WHERE n <= $1
		ORDER BY market_id COLLATE "C", ts DESC, trade_id COLLATE "C" DESC`, limit)
	if err != nil {
		return fmt.Errorf("store: read trades: %w", err)
	}
	var (
		t       Trade
		current string
		batch   []Trade
	)
	if _, err := pgx.ForEachRow(rows, []any{&t.TradeID, &t.MarketID, &t.Venue, &t.Price, &t.Size, &t.Side, &t.TS}, func() error {
		if t.MarketID != current && len(batch) > 0 {
			if err := fn(current, batch); err != nil {
				return err
			}
			batch = nil
		}
		current = t.MarketID
		tt := t
		tt.TS = tt.TS.UTC()
		batch = append(batch, tt)
		return nil
	}); err != nil {
		return fmt.Errorf("store: read trades: %w", err)
	}
	if len(batch) > 0 {
		return fn(current, batch)
	}
	return nil
}

// AdvanceRevisions moves the document revision sequence past floor and gives
// every document a fresh revision from there. A rebuild calls it when Redis
// holds revisions above the store's (Postgres restored from a backup or
// recreated), so that the rebuild's writes and later ingest writes win. Rows
// are locked in document order, the order ingest locks them in.
func (s *Store) AdvanceRevisions(ctx context.Context, floor int64) (int, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT setval('doc_rev_seq', GREATEST($1, (SELECT last_value FROM doc_rev_seq)))`, floor); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			UPDATE doc_revs AS d
			SET rev = nextval('doc_rev_seq')
			FROM (SELECT doc FROM doc_revs ORDER BY doc FOR UPDATE) AS locked
			WHERE d.doc = locked.doc`)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: advance revisions past %d: %w", floor, err)
	}
	return int(n), nil
}

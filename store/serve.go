package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Reads an API node makes when Redis lacks a document (evicted, flushed):
// the answer comes from here and the document is written back to Redis.
// Each read takes the documents' revisions in the same snapshot as their
// state, so the repair write is guarded like any ingest write.

func (s *Store) snapshotRead(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func docRevs(ctx context.Context, tx pgx.Tx, prefix string, ids []string) (map[string]int64, error) {
	revs := make(map[string]int64, len(ids))
	docs := make([]string, len(ids))
	for i, id := range ids {
		docs[i] = prefix + id
		revs[id] = 0
	}
	rows, err := tx.Query(ctx, `SELECT substr(doc, 3), rev FROM doc_revs WHERE doc = ANY($1)`, docs)
	if err != nil {
		return nil, err
	}
	var id string
	var rev int64
	_, err = pgx.ForEachRow(rows, []any{&id, &rev}, func() error {
		revs[id] = rev
		return nil
	})
	return revs, err
}

// EventDocsByID reads the documents of the given events.
func (s *Store) EventDocsByID(ctx context.Context, ids []string) ([]EventDoc, error) {
	var docs []EventDoc
	err := s.snapshotRead(ctx, func(tx pgx.Tx) error {
		revs, err := docRevs(ctx, tx, "e:", ids)
		if err != nil {
			return err
		}
		docs, err = readEventDocs(ctx, tx, revs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read event documents: %w", err)
	}
	return docs, nil
}

// MarketDocsByID reads the price-item documents of the given markets.
func (s *Store) MarketDocsByID(ctx context.Context, ids []string) ([]MarketDoc, error) {
	var docs []MarketDoc
	err := s.snapshotRead(ctx, func(tx pgx.Tx) error {
		revs, err := docRevs(ctx, tx, "m:", ids)
		if err != nil {
			return err
		}
		docs, err = readMarketDocs(ctx, tx, revs, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read market documents: %w", err)
	}
	return docs, nil
}

// NewestTrades reads a market's newest trades: ts desc, then trade_id desc.
func (s *Store) NewestTrades(ctx context.Context, marketID string, limit int) ([]Trade, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT trade_id, market_id, venue, price, size, side, ts
		FROM trades
		WHERE market_id = $1
		ORDER BY ts DESC, trade_id DESC
		LIMIT $2`, marketID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: read trades of %s: %w", marketID, err)
	}
	trades, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Trade, error) {
		var t Trade
		err := r.Scan(&t.TradeID, &t.MarketID, &t.Venue, &t.Price, &t.Size, &t.Side, &t.TS)
		t.TS = t.TS.UTC()
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read trades of %s: %w", marketID, err)
	}
	return trades, nil
}

// ListFilter is the /events filter; empty fields do not filter.
type ListFilter struct {
	Category string
	// Venue is a venue name (venue_a…venue_d) the event must have an id on.
	Venue     string
	MinVenues int
	MatchFilter
}

// linksFail is the SQL condition that one of the event's venue links fails
// an active MatchFilter ($4 the least confidence, $5 the relation or ""):
// a link fails when it has no metadata (a missing key, or a JSON null
// written by hand), is less sure than $4, or has another relation than $5.
// Only an active filter adds it, so that a link without metadata failing
// is right.
const linksFail = `EXISTS (
		SELECT 1
		FROM (VALUES ('venue_a', e.venue_a_event_ticker), ('venue_b', e.venue_b_event_slug),
		             ('venue_c', e.venue_c_event_id), ('venue_d', e.venue_d_event_id)) AS l(venue, id)
		WHERE l.id IS NOT NULL
		  AND (e.matches -> l.venue ->> 'confidence' IS NULL
		       OR (e.matches -> l.venue ->> 'confidence')::float8 < $4::float8
		       OR ($5::text <> '' AND (e.matches -> l.venue ->> 'relation') IS DISTINCT FROM $5::text)))`

// ListedEvents reads served active events matching f with ids above after
// (bytewise), ascending, at most limit (0 = all).
func (s *Store) ListedEvents(ctx context.Context, f ListFilter, after string, limit int) ([]Event, error) {
	venueCol := ""
	if i := VenueIndex(f.Venue); i >= 0 {
		venueCol = EventVenueFields[i]
	}
	q := `
		SELECT ` + eventColumns + `
		FROM events e
		WHERE e.status = 'active'
		  AND e.universal_id > $1
		  AND ($2 = '' OR e.category = $2)
		  AND (num_nonnulls(e.venue_a_event_ticker, e.venue_b_event_slug, e.venue_c_event_id, e.venue_d_event_id)) >= GREATEST(2, $3)`
	if venueCol != "" {
		q += ` AND e.` + venueCol + ` IS NOT NULL` // a column name from a fixed list
	}
	args := []any{after, f.Category, f.MinVenues}
	if f.MatchFilter.Active() {
		q += ` AND NOT ` + linksFail
		args = append(args, f.MinConfidence, f.Relation)
	}
	q += ` ORDER BY e.universal_id`
	if limit > 0 {
		args = append(args, limit)
		q += ` LIMIT $` + strconv.Itoa(len(args))
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list events: %w", err)
	}
	var out []Event
	var ne nullEvent
	_, err = pgx.ForEachRow(rows, ne.dest(), func() error {
		out = append(out, *ne.event())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list events: %w", err)
	}
	return out, nil
}

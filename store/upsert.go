package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DB is what the writes need: a transaction or a pool.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func collectApplied(rows pgx.Rows, kind string, applied map[string]bool) error {
	var key string
	_, err := pgx.ForEachRow(rows, []any{&key}, func() error {
		applied[kind+":"+key] = true
		return nil
	})
	return err
}

func upsertEvents(ctx context.Context, db DB, events []Event, applied map[string]bool) error {
	if len(events) == 0 {
		return nil
	}
	n := len(events)
	ids, titles, cats, statuses := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, volumes, updated := make([]int64, n), make([]float64, n), make([]time.Time, n)
	merged, va, vb, vc, vd := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	matches := make([]*string, n)
	for i, e := range events {
		ids[i], versions[i], titles[i], cats[i], statuses[i] = e.ID, e.Version, e.Title, e.Category, e.Status
		merged[i], volumes[i], updated[i] = e.MergedInto, e.Volume, e.UpdatedAt
		va[i], vb[i], vc[i], vd[i] = e.VenueIDs[0], e.VenueIDs[1], e.VenueIDs[2], e.VenueIDs[3]
		if !e.Matches.IsZero() {
			m, err := encodeMatches(&e.Matches)
			if err != nil {
				return fmt.Errorf("store: encode matches of event %s: %w", e.ID, err)
			}
			matches[i] = &m
		}
	}
	rows, err := db.Query(ctx, `
		INSERT INTO events AS t (
		    universal_id, version, title, category, status, merged_into,
		    venue_a_event_ticker, venue_b_event_slug, venue_c_event_id, venue_d_event_id,
		    volume, updated_at, matches)
		SELECT u.id, u.version, u.title, u.category, u.status, u.merged_into,
		    u.va, u.vb, u.vc, u.vd, u.volume, u.updated_at, u.matches::json
		FROM unnest(
		    $1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
		    $7::text[], $8::text[], $9::text[], $10::text[],
		    $11::double precision[], $12::timestamptz[], $13::text[])
		    AS u(id, version, title, category, status, merged_into, va, vb, vc, vd, volume, updated_at, matches)
		ON CONFLICT (universal_id) DO UPDATE SET
		    version = EXCLUDED.version,
		    title = EXCLUDED.title,
		    category = EXCLUDED.category,
		    status = EXCLUDED.status,
		    merged_into = EXCLUDED.merged_into,
		    venue_a_event_ticker = EXCLUDED.venue_a_event_ticker,
		    venue_b_event_slug = EXCLUDED.venue_b_event_slug,
		    venue_c_event_id = EXCLUDED.venue_c_event_id,
		    venue_d_event_id = EXCLUDED.venue_d_event_id,
		    volume = EXCLUDED.volume,
		    updated_at = EXCLUDED.updated_at,
		    matches = EXCLUDED.matches,
		    ingested_at = now()
		WHERE t.version < EXCLUDED.version
		RETURNING t.universal_id`,
		ids, versions, titles, cats, statuses, merged, va, vb, vc, vd, volumes, updated, matches)
	if err != nil {
		return fmt.Errorf("store: upsert %d events: %w", n, err)
	}
	if err := collectApplied(rows, "event", applied); err != nil {
		return fmt.Errorf("store: upsert %d events: %w", n, err)
	}
	return nil
}

func upsertMarkets(ctx context.Context, db DB, markets []Market, applied map[string]bool) error {
	if len(markets) == 0 {
		return nil
	}
	n := len(markets)
	ids, events, titles, statuses, venues := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, updated := make([]int64, n), make([]time.Time, n)
	resolvedAt, results, matches := make([]*time.Time, n), make([]*string, n), make([]*string, n)
	for i, m := range markets {
		v, err := json.Marshal(m.Venues)
		if err != nil {
			return fmt.Errorf("store: encode venues of market %s: %w", m.ID, err)
		}
		ids[i], events[i], versions[i], titles[i], statuses[i] = m.ID, m.EventID, m.Version, m.Title, m.Status
		venues[i], resolvedAt[i], results[i], updated[i] = string(v), m.ResolvedAt, m.Result, m.UpdatedAt
		if !m.Matches.IsZero() {
			x, err := encodeMatches(&m.Matches)
			if err != nil {
				return fmt.Errorf("store: encode matches of market %s: %w", m.ID, err)
			}
			matches[i] = &x
		}
	}
	rows, err := db.Query(ctx, `
		INSERT INTO markets AS t (
		    universal_id, event_id, version, title, status, venues, resolved_at, result, updated_at, matches)
		SELECT u.id, u.event_id, u.version, u.title, u.status, u.venues::jsonb, u.resolved_at, u.result, u.updated_at,
		    u.matches::json
		FROM unnest(
		    $1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[],
		    $7::timestamptz[], $8::text[], $9::timestamptz[], $10::text[])
		    AS u(id, event_id, version, title, status, venues, resolved_at, result, updated_at, matches)
		ON CONFLICT (universal_id) DO UPDATE SET
		    event_id = EXCLUDED.event_id,
		    version = EXCLUDED.version,
		    title = EXCLUDED.title,
		    status = EXCLUDED.status,
		    venues = EXCLUDED.venues,
		    resolved_at = EXCLUDED.resolved_at,
		    result = EXCLUDED.result,
		    updated_at = EXCLUDED.updated_at,
		    matches = EXCLUDED.matches,
		    ingested_at = now()
		WHERE t.version < EXCLUDED.version
		RETURNING t.universal_id`,
		ids, events, versions, titles, statuses, venues, resolvedAt, results, updated, matches)
	if err != nil {
		return fmt.Errorf("store: upsert %d markets: %w", n, err)
	}
	if err := collectApplied(rows, "market", applied); err != nil {
		return fmt.Errorf("store: upsert %d markets: %w", n, err)
	}
	return nil
}

// UpsertPrices writes prices outside any batch, versioned like ApplyBatch,
// and returns how many were applied. The benchmark uses it as the raw
// baseline of what Postgres alone can take.
func (s *Store) UpsertPrices(ctx context.Context, prices []Price) (int, error) {
	applied := map[string]bool{}
	if err := upsertPrices(ctx, s.pool, prices, applied); err != nil {
		return 0, err
	}
	return len(applied), nil
}

func upsertPrices(ctx context.Context, db DB, prices []Price, applied map[string]bool) error {
	if len(prices) == 0 {
		return nil
	}
	n := len(prices)
	ids, quotes := make([]string, n), make([]string, n)
	versions, ts := make([]int64, n), make([]time.Time, n)
	for i, p := range prices {
		q, err := json.Marshal(p.Quotes)
		if err != nil {
			return fmt.Errorf("store: encode quotes of market %s: %w", p.MarketID, err)
		}
		ids[i], versions[i], ts[i], quotes[i] = p.MarketID, p.Version, p.TS, string(q)
	}
	rows, err := db.Query(ctx, `
		INSERT INTO prices AS t (market_id, version, ts, quotes)
		SELECT u.market_id, u.version, u.ts, u.quotes::json
		FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::text[])
		    AS u(market_id, version, ts, quotes)
		ON CONFLICT (market_id) DO UPDATE SET
		    version = EXCLUDED.version,
		    ts = EXCLUDED.ts,
		    quotes = EXCLUDED.quotes,
		    ingested_at = now()
		WHERE t.version < EXCLUDED.version
		RETURNING t.market_id`,
		ids, versions, ts, quotes)
	if err != nil {
		return fmt.Errorf("store: upsert %d prices: %w", n, err)
	}
	if err := collectApplied(rows, "price", applied); err != nil {
		return fmt.Errorf("store: upsert %d prices: %w", n, err)
	}
	return nil
}

// InsertRejects records messages that were not applied.
func (s *Store) InsertRejects(ctx context.Context, rejects []Reject) error {
	if len(rejects) == 0 {
		return nil
	}
	n := len(rejects)
	subjects, kinds, reasons := make([]string, n), make([]string, n), make([]string, n)
	payloads, seqs, at := make([][]byte, n), make([]int64, n), make([]time.Time, n)
	for i, r := range rejects {
		subjects[i], kinds[i], reasons[i] = r.Subject, r.Kind, r.Reason
		payloads[i], seqs[i], at[i] = r.Payload, int64(r.StreamSeq), r.ReceivedAt
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO ingest_rejects (subject, kind, reason, payload, stream_seq, received_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::bigint[], $6::timestamptz[])
		ON CONFLICT (stream_seq, subject) DO NOTHING`,
		subjects, kinds, reasons, payloads, seqs, at)
	if err != nil {
		return fmt.Errorf("store: insert %d rejects: %w", n, err)
	}
	return nil
}

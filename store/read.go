package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

const eventColumns = `e.universal_id, e.version, e.title, e.category, e.status, e.merged_into,
	e.venue_a_event_ticker, e.venue_b_event_slug, e.venue_c_event_id, e.venue_d_event_id,
	e.volume, e.updated_at`

const marketColumns = `m.universal_id, m.event_id, m.version, m.title, m.status, m.venues,
	m.resolved_at, m.result, m.updated_at`

// nullEvent scans an event that may be absent from an outer join.
type nullEvent struct {
	id                                  *string
	version                             *int64
	title, category, status, mergedInto *string
	venues                              [4]*string
	volume                              *float64
	updatedAt                           *time.Time
}

func (n *nullEvent) dest() []any {
	return []any{&n.id, &n.version, &n.title, &n.category, &n.status, &n.mergedInto,
		&n.venues[0], &n.venues[1], &n.venues[2], &n.venues[3], &n.volume, &n.updatedAt}
}

func (n *nullEvent) event() *Event {
	if n.id == nil {
		return nil
	}
	return &Event{
		ID: *n.id, Version: *n.version, Title: *n.title, Category: *n.category, Status: *n.status,
		MergedInto: n.mergedInto, VenueIDs: n.venues, Volume: *n.volume, UpdatedAt: n.updatedAt.UTC(),
	}
}

// nullMarket scans a market that may be absent from an outer join.
type nullMarket struct {
	id, eventID, title, status *string
	version                    *int64
	venues                     map[string]string
	resolvedAt                 *time.Time
	result                     *string
	updatedAt                  *time.Time
}

func (n *nullMarket) dest() []any {
	return []any{&n.id, &n.eventID, &n.version, &n.title, &n.status, &n.venues,
		&n.resolvedAt, &n.result, &n.updatedAt}
}

func (n *nullMarket) market() *Market {
	if n.id == nil {
		return nil
	}
	m := &Market{
		ID: *n.id, EventID: *n.eventID, Version: *n.version, Title: *n.title, Status: *n.status,
		Venues: n.venues, Result: n.result, UpdatedAt: n.updatedAt.UTC(),
	}
	if m.Venues == nil {
		m.Venues = map[string]string{}
	}
	if n.resolvedAt != nil {
		t := n.resolvedAt.UTC()
		m.ResolvedAt = &t
	}
	return m
}

// nullPrice scans a price that may be absent from an outer join.
type nullPrice struct {
	marketID *string
	version  *int64
	ts       *time.Time
	quotes   map[string]Quote
}

func (n *nullPrice) dest() []any {
	return []any{&n.marketID, &n.version, &n.ts, &n.quotes}
}

func (n *nullPrice) price() *Price {
	if n.marketID == nil {
		return nil
	}
	return &Price{MarketID: *n.marketID, Version: *n.version, TS: n.ts.UTC(), Quotes: n.quotes}
}

// readEventDocs reads the state of the given events and all their markets.
func readEventDocs(ctx context.Context, db DB, revs map[string]int64) ([]EventDoc, error) {
	if len(revs) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(revs))
	for id := range revs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	docs := make([]EventDoc, len(ids))
	byID := make(map[string]*EventDoc, len(ids))
	for i, id := range ids {
		docs[i] = EventDoc{ID: id, Rev: revs[id]}
		byID[id] = &docs[i]
	}

	rows, err := db.Query(ctx, `SELECT `+eventColumns+` FROM events e WHERE e.universal_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: read events: %w", err)
	}
	var ne nullEvent
	if _, err := pgx.ForEachRow(rows, ne.dest(), func() error {
		e := ne.event()
		byID[e.ID].Event = e
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: read events: %w", err)
	}

	rows, err = db.Query(ctx, `
		SELECT `+marketColumns+`
		FROM markets m
		WHERE m.event_id = ANY($1)
		ORDER BY m.event_id COLLATE "C", m.universal_id COLLATE "C"`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: read markets of events: %w", err)
	}
	var nm nullMarket
	if _, err := pgx.ForEachRow(rows, nm.dest(), func() error {
		m := nm.market()
		d := byID[m.EventID]
		d.Markets = append(d.Markets, *m)
		nm.venues = nil // a fresh map per row
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: read markets of events: %w", err)
	}
	return docs, nil
}

const marketDocQuery = `
	SELECT d.id, d.rev, ` + marketColumns + `, ` + eventColumns + `,
	       p.market_id, p.version, p.ts, p.quotes
	FROM docs d
	LEFT JOIN markets m ON m.universal_id = d.id
	LEFT JOIN events e ON e.universal_id = m.event_id
	LEFT JOIN prices p ON p.market_id = d.id AND NOT d.known
	ORDER BY d.id COLLATE "C"`

func scanMarketDocs(rows pgx.Rows, fn func(MarketDoc) error) error {
	var (
		id  string
		rev int64
		nm  nullMarket
		ne  nullEvent
		np  nullPrice
	)
	dest := append([]any{&id, &rev}, nm.dest()...)
	dest = append(dest, ne.dest()...)
	dest = append(dest, np.dest()...)
	_, err := pgx.ForEachRow(rows, dest, func() error {
		d := MarketDoc{ID: id, Rev: rev, Market: nm.market(), Event: ne.event(), Price: np.price()}
		nm.venues, np.quotes = nil, nil
		return fn(d)
	})
	return err
}

// readMarketDocs reads the state of the given markets' price items. Prices
// in known were just written by this transaction, so they are what is stored
// and are not read back.
func readMarketDocs(ctx context.Context, db DB, revs map[string]int64, known map[string]*Price) ([]MarketDoc, error) {
	if len(revs) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(revs))
	rv := make([]int64, 0, len(revs))
	kn := make([]bool, 0, len(revs))
	for id, r := range revs {
		ids, rv, kn = append(ids, id), append(rv, r), append(kn, known[id] != nil)
	}
	rows, err := db.Query(ctx, `WITH docs AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bool[]) AS u(id, rev, known))`+marketDocQuery, ids, rv, kn)
	if err != nil {
		return nil, fmt.Errorf("store: read market documents: %w", err)
	}
	docs := make([]MarketDoc, 0, len(ids))
	if err := scanMarketDocs(rows, func(d MarketDoc) error {
		if p := known[d.ID]; p != nil {
			stored := *p
			stored.TS = p.TS.UTC().Truncate(time.Microsecond) // what timestamptz keeps
			d.Price = &stored
		}
		docs = append(docs, d)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: read market documents: %w", err)
	}
	return docs, nil
}

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

// TradesByID reads the stored trades with the given ids (absent ones are
// left out), ascending by id.
func (s *Store) TradesByID(ctx context.Context, ids []string) ([]Trade, error) {
	return readTradeIDs(ctx, s.pool, ids)
}

// readTrades reads back the stored form of the given trades.
func readTrades(ctx context.Context, db DB, trades []Trade) ([]Trade, error) {
	ids := make([]string, len(trades))
	for i, t := range trades {
		ids[i] = t.TradeID
	}
	return readTradeIDs(ctx, db, ids)
}

func readTradeIDs(ctx context.Context, db DB, ids []string) ([]Trade, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, `
		SELECT trade_id, market_id, venue, price, size, side, ts
		FROM trades
		WHERE trade_id = ANY($1)
		ORDER BY trade_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: read back trades: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Trade, error) {
		var t Trade
		err := r.Scan(&t.TradeID, &t.MarketID, &t.Venue, &t.Price, &t.Size, &t.Side, &t.TS)
		t.TS = t.TS.UTC()
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read back trades: %w", err)
	}
	return out, nil
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

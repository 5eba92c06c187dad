package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

const eventColumns = `e.universal_id, e.version, e.title, e.category, e.status, e.merged_into,
	e.venue_a_event_ticker, e.venue_b_event_slug, e.venue_c_event_id, e.venue_d_event_id,
	e.volume, e.updated_at, e.matches`

const marketColumns = `m.universal_id, m.event_id, m.version, m.title, m.status, m.venues,
	m.resolved_at, m.result, m.updated_at, m.matches`

// nullEvent scans an event that may be absent from an outer join.
type nullEvent struct {
	id                                  *string
	version                             *int64
	title, category, status, mergedInto *string
	venues                              [4]*string
	volume                              *float64
	updatedAt                           *time.Time
	matches                             matchesCol
}

func (n *nullEvent) dest() []any {
	return []any{&n.id, &n.version, &n.title, &n.category, &n.status, &n.mergedInto,
		&n.venues[0], &n.venues[1], &n.venues[2], &n.venues[3], &n.volume, &n.updatedAt, &n.matches}
}

func (n *nullEvent) event() *Event {
	if n.id == nil {
		return nil
	}
	return &Event{
		ID: *n.id, Version: *n.version, Title: *n.title, Category: *n.category, Status: *n.status,
		MergedInto: n.mergedInto, VenueIDs: n.venues, Volume: *n.volume, UpdatedAt: n.updatedAt.UTC(),
		Matches: n.matches.m,
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
	matches                    matchesCol
}

func (n *nullMarket) dest() []any {
	return []any{&n.id, &n.eventID, &n.version, &n.title, &n.status, &n.venues,
		&n.resolvedAt, &n.result, &n.updatedAt, &n.matches}
}

func (n *nullMarket) market() *Market {
	if n.id == nil {
		return nil
	}
	m := &Market{
		ID: *n.id, EventID: *n.eventID, Version: *n.version, Title: *n.title, Status: *n.status,
		Venues: n.venues, Result: n.result, UpdatedAt: n.updatedAt.UTC(), Matches: n.matches.m,
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

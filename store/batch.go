package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Batch is a set of validated updates applied in one transaction.
type Batch struct {
	Events  []Event
	Markets []Market
	Prices  []Price
	Trades  []Trade
	// Touch names events whose documents must be rebuilt although the batch
	// changes none of their data (a resolved market aging out of retention).
	Touch []string

	// points are Prices as given, before Dedup: every price message is a
	// point of the candles, not only the newest of each market.
	points []Price
}

// Len is the number of updates in the batch.
func (b *Batch) Len() int {
	return len(b.Events) + len(b.Markets) + len(b.Prices) + len(b.Trades) + len(b.Touch)
}

// Dedup keeps one update per key: the highest version (the first one seen for
// trades, which are immutable). Order is by key, which also fixes the order in
// which rows are locked.
func (b *Batch) Dedup() {
	b.Events = dedup(b.Events, func(e Event) string { return e.ID }, func(e Event) int64 { return e.Version })
	b.Markets = dedup(b.Markets, func(m Market) string { return m.ID }, func(m Market) int64 { return m.Version })
	b.Prices = dedup(b.Prices, func(p Price) string { return p.MarketID }, func(p Price) int64 { return p.Version })
	b.Trades = dedup(b.Trades, func(t Trade) string { return t.TradeID }, func(Trade) int64 { return 0 })
	slices.Sort(b.Touch)
	b.Touch = slices.Compact(b.Touch)
}

func dedup[T any](xs []T, key func(T) string, version func(T) int64) []T {
	if len(xs) < 2 {
		return xs
	}
	// Stable sort by key, highest version first; keep the first of each key.
	slices.SortStableFunc(xs, func(a, b T) int {
		if c := cmp.Compare(key(a), key(b)); c != 0 {
			return c
		}
		return cmp.Compare(version(b), version(a))
	})
	return slices.CompactFunc(xs, func(a, b T) bool { return key(a) == key(b) })
}

// EventDoc is everything the cached documents of one event derive from, read
// inside the transaction that took revision Rev.
type EventDoc struct {
	ID  string
	Rev int64
	// Event is nil while only markets referring to it are known.
	Event *Event
	// Markets are all markets of the event, ascending by id.
	Markets []Market
}

// MarketDoc is everything the cached price item of one market derives from.
// A batch's Market and Event may be the ones its process's deps cache holds
// (shared with later batches and, for Event, with other markets): read them,
// never write them. A batch of prices and trades only (the one-round-trip
// path) carries the market as PriceItemMarket projects it; the other
// batches and the reads carry the whole row.
type MarketDoc struct {
	ID     string
	Rev    int64
	Market *Market // nil while only its price is known
	Event  *Event  // the market's event; nil when unknown
	Price  *Price  // nil until a price arrives
}

// Result says what a batch changed and carries the documents to cache.
type Result struct {
	// Applied holds the keys whose update was written, as "<kind>:<key>"
	// (kinds event, market, price, trade). Other updates were not above the
	// stored version (or, for trades, already stored).
	Applied map[string]bool
	Events  []EventDoc
	Markets []MarketDoc
	// Trades are all trades of the batch as stored (a replayed trade id with
	// other fields keeps the first one): caching them again is harmless and
	// repairs a cache write lost to a crash.
	Trades []Trade
}

// errStaleDeps means a market moved to another event between the unlocked
// read of its event and the lock on its document; the batch is retried.
var errStaleDeps = errors.New("store: a market changed event while its batch was being locked")

// ApplyBatch writes the batch in one transaction: versioned upserts (an update
// applies only if its version is above the stored one), trades deduplicated by
// trade id, the candles of the prices and trades applied (every price message
// above the version stored before the batch counts, even one that a newer
// message of the same batch replaces), and a fresh revision for every cache
// document the batch touches, taken under that document's row lock so that
// revisions follow commit order. Deadlocks and serialization failures are
// retried.
func (s *Store) ApplyBatch(ctx context.Context, b *Batch) (*Result, error) {
	if b.points == nil && len(b.Prices) > 1 {
		b.points = slices.Clone(b.Prices)
	}
	b.Dedup()
	apply := s.applyOnce
	if b.pricesOnly() {
		apply = s.applyPrices
	}
	var err error
	for attempt := range 8 {
		var res *Result
		res, err = apply(ctx, b)
		if err == nil {
			return res, nil
		}
		if !retryable(err) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("store: apply batch: gave up after retries: %w", err)
}

func retryable(err error) bool {
	if errors.Is(err, errStaleDeps) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

func (s *Store) applyOnce(ctx context.Context, b *Batch) (*Result, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit; on failure the error returned says what went wrong

	marketIDs := make([]string, len(b.Markets))
	for i, m := range b.Markets {
		marketIDs[i] = m.ID
	}
	oldEvent, err := marketEvents(ctx, tx, marketIDs)
	if err != nil {
		return nil, err
	}

	// Event documents first, all of them in key order, then market documents:
	// every transaction locks in this one order, so they cannot deadlock.
	eventIDs := set{}
	for _, e := range b.Events {
		eventIDs.add(e.ID)
	}
	eventIDs.add(b.Touch...)
	changedEvents := eventIDs.sorted() // events whose own state or market set may change the served set
	for _, m := range b.Markets {
		eventIDs.add(m.EventID)
	}
	for _, e := range oldEvent {
		eventIDs.add(e)
	}
	eventRevs, _, err := lockDocs(ctx, tx, "e:", eventIDs.sorted(), nil)
	if err != nil {
		return nil, err
	}

	// With the event documents locked, their market sets cannot change.
	// structural are the market documents whose market row or event may
	// change: they get a fresh deps stamp, which makes every process's cached
	// rows of them stale.
	structural := set{}
	structural.add(marketIDs...)
	ofEvents, err := marketsOfEvents(ctx, tx, changedEvents)
	if err != nil {
		return nil, err
	}
	structural.add(ofEvents...)
	affected := set{}
	affected.add(marketIDs...)
	affected.add(ofEvents...)
	for _, p := range b.Prices {
		affected.add(p.MarketID)
	}
	marketRevs, marketStamps, err := lockDocs(ctx, tx, "m:", affected.sorted(), structural)
	if err != nil {
		return nil, err
	}
	// With the market documents locked, the markets' events cannot change:
	// check the unlocked read taken before.
	nowEvent, err := marketEvents(ctx, tx, marketIDs)
	if err != nil {
		return nil, err
	}
	for id, e := range nowEvent {
		if oldEvent[id] != e {
			return nil, errStaleDeps
		}
	}

	res := &Result{Applied: map[string]bool{}}
	if err := upsertEvents(ctx, tx, b.Events, res.Applied); err != nil {
		return nil, err
	}
	if err := upsertMarkets(ctx, tx, b.Markets, res.Applied); err != nil {
		return nil, err
	}
	if err := s.writePricesTrades(ctx, tx, b, res); err != nil {
		return nil, err
	}

	if res.Events, err = readEventDocs(ctx, tx, eventRevs); err != nil {
		return nil, err
	}
	written := make(map[string]*Price, len(b.Prices))
	for i := range b.Prices {
		if p := &b.Prices[i]; res.Applied["price:"+p.MarketID] {
			written[p.MarketID] = p
		}
	}
	if res.Markets, err = readMarketDocs(ctx, tx, marketRevs, written); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store: commit batch: %w", err)
	}
	// The rows were read under the documents' locks, at the stamps those
	// locks returned: the deps cache takes them, so a market's first price
	// after this batch (a new market's, most often) reads neither row nor
	// computes its candle modes in Postgres (see depsCache).
	for i := range res.Markets {
		d := &res.Markets[i]
		if stamp, ok := marketStamps[d.ID]; ok {
			d.Event = s.deps.put(d.ID, stamp, PriceItemMarket(d.Market), d.Event)
		}
	}
	return res, nil
}

// set is a small string set with a sorted view.
type set map[string]struct{}

func (s set) add(xs ...string) {
	for _, x := range xs {
		s[x] = struct{}{}
	}
}

func (s set) sorted() []string {
	out := make([]string, 0, len(s))
	for x := range s {
		out = append(out, x)
	}
	slices.Sort(out)
	return out
}

// lockDocsSQL takes the row locks of the named documents ($1, in key order)
// and gives each a fresh revision, drawn after the lock is held, so that for
// one document later commits always carry higher revisions. A document marked
// in $2 also gets a fresh deps stamp: the batch changes what it derives from
// besides a price (see depsCache).
const lockDocsSQL = `
	INSERT INTO doc_revs AS d (doc, rev, deps)
	SELECT u.doc, nextval('doc_rev_seq'), CASE WHEN u.deps THEN nextval('doc_rev_seq') ELSE 0 END
	FROM unnest($1::text[], $2::bool[]) AS u(doc, deps)
	ORDER BY u.doc COLLATE "C"
	ON CONFLICT (doc) DO UPDATE SET
	    rev = nextval('doc_rev_seq'),
	    deps = CASE WHEN EXCLUDED.deps <> 0 THEN nextval('doc_rev_seq') ELSE d.deps END
	RETURNING d.doc, d.rev, d.deps`

// lockDocs runs lockDocsSQL for ids (sorted) and returns their revisions and
// deps stamps. The documents in deps get a fresh deps stamp.
func lockDocs(ctx context.Context, tx pgx.Tx, prefix string, ids []string, deps set) (revs, stamps map[string]int64, err error) {
	revs = make(map[string]int64, len(ids))
	stamps = make(map[string]int64, len(ids))
	if len(ids) == 0 {
		return revs, stamps, nil
	}
	docs := make([]string, len(ids))
	marks := make([]bool, len(ids))
	for i, id := range ids {
		docs[i] = prefix + id
		_, marks[i] = deps[id]
	}
	rows, err := tx.Query(ctx, lockDocsSQL, docs, marks)
	if err != nil {
		return nil, nil, fmt.Errorf("store: lock %s documents: %w", prefix, err)
	}
	var doc string
	var rev, stamp int64
	_, err = pgx.ForEachRow(rows, []any{&doc, &rev, &stamp}, func() error {
		revs[doc[len(prefix):]] = rev
		stamps[doc[len(prefix):]] = stamp
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: lock %s documents: %w", prefix, err)
	}
	return revs, stamps, nil
}

func marketEvents(ctx context.Context, tx pgx.Tx, marketIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(marketIDs))
	if len(marketIDs) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT universal_id, event_id
		FROM markets
		WHERE universal_id = ANY($1)`, marketIDs)
	if err != nil {
		return nil, fmt.Errorf("store: read market events: %w", err)
	}
	var id, ev string
	_, err = pgx.ForEachRow(rows, []any{&id, &ev}, func() error {
		out[id] = ev
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read market events: %w", err)
	}
	return out, nil
}

func marketsOfEvents(ctx context.Context, tx pgx.Tx, eventIDs []string) ([]string, error) {
	if len(eventIDs) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT universal_id
		FROM markets
		WHERE event_id = ANY($1)`, eventIDs)
	if err != nil {
		return nil, fmt.Errorf("store: read markets of events: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: read markets of events: %w", err)
	}
	return ids, nil
}

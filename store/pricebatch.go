package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// The hot path: a batch of prices and trades only (no event, market or
// touch), which is nearly every batch once a world is loaded. It is one
// round trip: the statements go in one pipeline ending in one Sync, so
// Postgres runs them as one implicit transaction, and the document locks are
// held only while the server executes them, never across a network wait.
//
//  1. lock and renumber the market documents (the statement lockDocs runs,
//     in the same global order);
//  2. upsert the prices and read the documents back in one statement, whose
//     snapshot is taken after statement 1 holds every lock, so it sees every
//     earlier commit of these documents. It reads a price only where this
//     batch did not write it, and the market and event rows only where the
//     document's deps stamp differs from the process's cached one;
//  3. insert the trades and read them back.

// priceDocsSQL is statement 2. $5 holds each market's cached deps stamp (-1
// when none). The conditional reads are LATERAL lookups whose condition on
// the outer row comes first: Postgres tests it before touching the index.
// LIMIT 1 (each is a primary-key lookup anyway) keeps the planner from
// flattening them back into joins, so each can only be a lookup per row. As
// plain joins (a NULL join key for "not needed"), a batch of 1,000 on a
// 250,000-market world was planned as a hash join over all of prices: 164 ms
// of a 190 ms statement (TestPriceDocsReadsByKey).
const priceDocsSQL = `
	WITH u AS (
	    SELECT *
	    FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::text[], $5::bigint[])
	        AS u(market_id, version, ts, quotes, cached)
	), up AS (
	    INSERT INTO prices AS t (market_id, version, ts, quotes)
	    SELECT u.market_id, u.version, u.ts, u.quotes::json
	    FROM u
	    ON CONFLICT (market_id) DO UPDATE SET
	        version = EXCLUDED.version,
	        ts = EXCLUDED.ts,
	        quotes = EXCLUDED.quotes,
	        ingested_at = now()
	    WHERE t.version < EXCLUDED.version
	    RETURNING t.market_id
	)
	SELECT u.market_id, up.market_id IS NOT NULL, d.rev, d.deps,
	       ` + marketColumns + `, ` + eventColumns + `,
	       p.market_id, p.version, p.ts, p.quotes
	FROM u
	JOIN doc_revs d ON d.doc = 'm:' || u.market_id
	LEFT JOIN up ON up.market_id = u.market_id
	LEFT JOIN LATERAL (
	    SELECT * FROM markets m WHERE d.deps <> u.cached AND m.universal_id = u.market_id LIMIT 1
	) m ON true
	LEFT JOIN LATERAL (SELECT * FROM events e WHERE e.universal_id = m.event_id LIMIT 1) e ON true
	LEFT JOIN LATERAL (
	    SELECT * FROM prices p WHERE up.market_id IS NULL AND p.market_id = u.market_id LIMIT 1
	) p ON true`

const insertTradesSQL = `
	INSERT INTO trades (trade_id, market_id, venue, price, size, side, ts)
	SELECT * FROM unnest(
	    $1::text[], $2::text[], $3::text[], $4::double precision[],
	    $5::double precision[], $6::text[], $7::timestamptz[])
	ON CONFLICT (trade_id) DO NOTHING
	RETURNING trade_id`

const readTradesSQL = `
	SELECT trade_id, market_id, venue, price, size, side, ts
	FROM trades
	WHERE trade_id = ANY($1)
	ORDER BY trade_id`

// pricesOnly reports whether the batch takes the one-round-trip path.
func (b *Batch) pricesOnly() bool {
	return len(b.Events) == 0 && len(b.Markets) == 0 && len(b.Touch) == 0
}

// applyPrices writes a deduplicated batch of prices and trades in one round
// trip (see above).
func (s *Store) applyPrices(ctx context.Context, b *Batch) (*Result, error) {
	res := &Result{Applied: map[string]bool{}}
	q := &pgx.Batch{}
	n := len(b.Prices)
	var cached []depsEntry
	if n > 0 {
		ids, docs, quotes := make([]string, n), make([]string, n), make([]string, n)
		versions, ts, stamps := make([]int64, n), make([]time.Time, n), make([]int64, n)
		for i, p := range b.Prices {
			qs, err := json.Marshal(p.Quotes)
			if err != nil {
				return nil, fmt.Errorf("store: encode quotes of market %s: %w", p.MarketID, err)
			}
			ids[i], docs[i], versions[i], ts[i], quotes[i] = p.MarketID, "m:"+p.MarketID, p.Version, p.TS, string(qs)
		}
		// Entries are taken once: the rendering uses the rows of the stamp
		// that was sent, even if another applier records a newer one meanwhile.
		cached = s.deps.get(ids)
		for i, e := range cached {
			stamps[i] = e.deps
		}
		// docs is in key order (Dedup sorted the prices): the global lock order.
		q.Queue(lockDocsSQL, docs, make([]bool, n))
		q.Queue(priceDocsSQL, ids, versions, ts, quotes, stamps)
	}
	var tradeIDs []string
	if len(b.Trades) > 0 {
		args := tradeArgs(b.Trades)
		tradeIDs = args[0].([]string)
		q.Queue(insertTradesSQL, args...)
		q.Queue(readTradesSQL, tradeIDs)
	}

	br := s.pool.SendBatch(ctx, q)
	err := func() error {
		if n > 0 {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("store: lock m: documents: %w", err)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("store: lock m: documents: %w", err)
			}
			if res.Markets, err = s.scanPriceDocs(br, b.Prices, cached, res.Applied); err != nil {
				return err
			}
		}
		if len(b.Trades) > 0 {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("store: insert %d trades: %w", len(b.Trades), err)
			}
			if err := collectApplied(rows, "trade", res.Applied); err != nil {
				return fmt.Errorf("store: insert %d trades: %w", len(b.Trades), err)
			}
			rows, err = br.Query()
			if err != nil {
				return fmt.Errorf("store: read back trades: %w", err)
			}
			if res.Trades, err = pgx.CollectRows(rows, scanTrade); err != nil {
				return fmt.Errorf("store: read back trades: %w", err)
			}
		}
		return nil
	}()
	// Close reads the Sync: the implicit transaction's commit.
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("store: commit batch: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// scanPriceDocs reads statement 2's answer into the batch's market documents,
// in id order, and records the rows it read in the deps cache.
func (s *Store) scanPriceDocs(br pgx.BatchResults, prices []Price, cached []depsEntry, applied map[string]bool) ([]MarketDoc, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("store: upsert %d prices: %w", len(prices), err)
	}
	pos := make(map[string]int, len(prices))
	for i, p := range prices {
		pos[p.MarketID] = i
	}
	var (
		id        string
		wrote     bool
		rev, deps int64
		nm        nullMarket
		ne        nullEvent
		np        nullPrice
	)
	dest := append([]any{&id, &wrote, &rev, &deps}, nm.dest()...)
	dest = append(dest, ne.dest()...)
	dest = append(dest, np.dest()...)
	docs := make([]MarketDoc, 0, len(prices))
	_, err = pgx.ForEachRow(rows, dest, func() error {
		i, ok := pos[id]
		if !ok {
			return fmt.Errorf("store: document of unknown market %q", id)
		}
		d := MarketDoc{ID: id, Rev: rev}
		if c := cached[i]; c.deps == deps {
			d.Market, d.Event = c.market, c.event
		} else {
			d.Market, d.Event = nm.market(), ne.event()
			d.Event = s.deps.put(id, deps, d.Market, d.Event)
		}
		if wrote {
			applied["price:"+id] = true
			stored := prices[i]
			stored.TS = stored.TS.UTC().Truncate(time.Microsecond) // what timestamptz keeps
			d.Price = &stored
		} else {
			d.Price = np.price()
		}
		nm.venues, np.quotes = nil, nil // fresh maps per row
		docs = append(docs, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: upsert %d prices: %w", len(prices), err)
	}
	slices.SortFunc(docs, func(a, b MarketDoc) int { return cmp.Compare(a.ID, b.ID) })
	return docs, nil
}

func tradeArgs(trades []Trade) []any {
	n := len(trades)
	ids, markets, venues, sides := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	prices, sizes, ts := make([]float64, n), make([]float64, n), make([]time.Time, n)
	for i, t := range trades {
		ids[i], markets[i], venues[i], sides[i] = t.TradeID, t.MarketID, t.Venue, t.Side
		prices[i], sizes[i], ts[i] = t.Price, t.Size, t.TS
	}
	return []any{ids, markets, venues, prices, sizes, sides, ts}
}

func scanTrade(r pgx.CollectableRow) (Trade, error) {
	var t Trade
	err := r.Scan(&t.TradeID, &t.MarketID, &t.Venue, &t.Price, &t.Size, &t.Side, &t.TS)
	t.TS = t.TS.UTC()
	return t, err
}

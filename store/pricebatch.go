package store

import (
	"cmp"
	"context"
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
//  2. the batch statement (candlesql.go): upsert the prices, insert the
//     trades, merge the candles they make, and read the documents back. Its
//     snapshot is taken after statement 1 holds every lock, so it sees every
//     earlier commit of these documents. It reads a price only where this
//     batch did not write it, and the market and event rows only where the
//     document's deps stamp differs from the process's cached one;
//  3. read the trades back, with which of them this transaction inserted.

// pricesOnly reports whether the batch takes the one-round-trip path.
func (b *Batch) pricesOnly() bool {
	return len(b.Events) == 0 && len(b.Markets) == 0 && len(b.Touch) == 0
}

// applyPrices writes a deduplicated batch of prices and trades in one round
// trip (see above).
func (s *Store) applyPrices(ctx context.Context, b *Batch) (*Result, error) {
	res := &Result{Applied: map[string]bool{}}
	n := len(b.Prices)
	if n == 0 && len(b.Trades) == 0 {
		return res, nil
	}
	args, cached, err := s.batchArgs(b)
	if err != nil {
		return nil, err
	}
	q := &pgx.Batch{}
	if n > 0 {
		docs := make([]string, n)
		for i, p := range b.Prices {
			docs[i] = "m:" + p.MarketID
		}
		// docs is in key order (Dedup sorted the prices): the global lock order.
		q.Queue(lockDocsSQL, docs, make([]bool, n))
	}
	q.Queue(s.statement(b), args...)
	if len(b.Trades) > 0 {
		q.Queue(readBatchTradesSQL, s.tradeIDsArg(args))
	}

	br := s.pool.SendBatch(ctx, q)
	err = func() error {
		if n > 0 {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("store: lock m: documents: %w", err)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("store: lock m: documents: %w", err)
			}
		}
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("store: write %d prices and %d trades: %w", n, len(b.Trades), err)
		}
		if n > 0 {
			if res.Markets, err = s.scanPriceDocs(rows, b.Prices, cached, res.Applied); err != nil {
				return err
			}
		} else if _, err := pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return fmt.Errorf("store: write %d trades: %w", len(b.Trades), err)
		}
		if len(b.Trades) > 0 {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("store: read back trades: %w", err)
			}
			if res.Trades, err = collectBatchTrades(rows, res.Applied); err != nil {
				return err
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

// scanPriceDocs reads the batch statement's answer into the batch's market
// documents, in id order, and records the rows it read in the deps cache.
func (s *Store) scanPriceDocs(rows pgx.Rows, prices []Price, cached []depsEntry, applied map[string]bool) ([]MarketDoc, error) {
	pos := make(map[string]int, len(prices))
	for i, p := range prices {
		pos[p.MarketID] = i
	}
	var (
		id, modes string
		wrote     bool
		rev, deps int64
		nm        nullMarket
		ne        nullEvent
		np        nullPrice
	)
	dest := append([]any{&id, &rev, &deps, &modes}, nm.dest()...)
	dest = append(dest, ne.dest()...)
	dest = append(dest, &wrote)
	dest = append(dest, np.dest()...)
	docs := make([]MarketDoc, 0, len(prices))
	_, err := pgx.ForEachRow(rows, dest, func() error {
		i, ok := pos[id]
		if !ok {
			return fmt.Errorf("store: document of unknown market %q", id)
		}
		d := MarketDoc{ID: id, Rev: rev}
		if c := cached[i]; c.deps == deps {
			d.Market, d.Event = c.market, c.event
		} else {
			d.Market, d.Event = PriceItemMarket(nm.market()), ne.event()
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

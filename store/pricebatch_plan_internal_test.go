package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
)

// The batch statement reads the market, event and stored price of a batch's
// markets by key, one lookup each, whatever the batch's size: planned as
// joins, a batch of 1,000 on a large world hashed the whole prices table
// (164 ms of a 190 ms statement at 250,000 markets; 20,000 are enough to get
// that plan from a table without statistics, as autovacuum off leaves it).
func TestPriceDocsReadsByKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := testenv.Database(t)
	if _, err := Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	pool, err := OpenSized(dsn, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool)
	const markets, n = 20000, 1000
	at := time.Now().UTC()
	for k := 0; k < markets; k += n {
		b := &Batch{}
		for i := k; i < k+n; i++ {
			bid, ask := 0.4, 0.5
			b.Prices = append(b.Prices, Price{MarketID: fmt.Sprintf("pl-%05d", i), Version: 1, TS: at,
				Quotes: map[string]Quote{Venues[0]: {Bid: &bid, Ask: &ask}}})
		}
		if _, err := s.ApplyBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	b := &Batch{}
	for i := range n {
		// Half not newer (the stored price is read back); a market twice
		// in the batch every tenth (its points' versions are checked against
		// the stored one).
		bid, ask := 0.4, 0.5
		p := Price{MarketID: fmt.Sprintf("pl-%05d", i*(markets/n)), Version: int64(1 + i%2), TS: at,
			Quotes: map[string]Quote{Venues[0]: {Bid: &bid, Ask: &ask}}}
		b.Prices = append(b.Prices, p)
		if i%10 == 0 {
			p.Version++
			b.Prices = append(b.Prices, p)
		}
	}
	b.points = b.Prices
	b.Dedup()
	args, _, err := s.batchArgs(b)
	if err != nil {
		t.Fatal(err)
	}
	stamps := args[4].([]int64)
	for i := range stamps {
		stamps[i] = -1 // every stamp unknown: the market and event rows are read
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing of the EXPLAIN ANALYZE is kept
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+s.statement(b), args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	for _, table := range []string{"prices", "markets", "events"} { // the conditional reads; doc_revs is joined whole by design
		if strings.Contains(text, "Seq Scan on "+table) {
			t.Errorf("a batch of %d on %d markets scans %s whole:\n%s", n, markets, table, text)
		}
	}
}

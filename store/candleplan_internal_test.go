package store

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
)

func TestCandlePlan(t *testing.T) {
	if os.Getenv("MD_CANDLE_PLAN") == "" {
		t.Skip("MD_CANDLE_PLAN=1")
	}
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
	start := time.Now().UTC().Truncate(time.Hour)
	n := 0
	next := func() *Batch {
		b := &Batch{}
		for range 1000 {
			i, v := n%5000, int64(n/5000+1)
			n++
			b.Prices = append(b.Prices, costPrice("sparse", i, v, start.Add(time.Duration(v)*time.Minute)))
		}
		return b
	}
	for range 20 {
		if _, err := s.ApplyBatch(ctx, next()); err != nil {
			t.Fatal(err)
		}
	}
	b := next()
	args, _, err := s.batchArgs(b)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+s.statement(b), args...)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	t.Log("\n" + strings.Join(out, "\n"))
}

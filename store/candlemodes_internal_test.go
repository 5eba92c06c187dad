package store

import (
	"encoding/json"
	"testing"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestCandleModes: the modes ingest takes from a market row in memory are
// the ones candle_modes gives from the stored metadata, in either shape the
// metadata may be stored (an object by venue, an array in venue order).
func TestCandleModes(t *testing.T) {
	ctx := t.Context()
	dsn := testenv.Database(t)
	if _, err := Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	pool, err := Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if got := candleModes(nil); got != "nnnn" {
		t.Errorf("candleModes(nil) = %q, want nnnn", got)
	}
	relations := append([]string{""}, Relations[:]...)
	for i := range len(relations) * len(relations) {
		var m Market
		rels := [4]string{relations[i%len(relations)], relations[i/len(relations)], "", relations[(i+1)%len(relations)]}
		byVenue := map[string]*Match{}
		for k, r := range rels {
			if r != "" {
				m.Matches[k] = &Match{Relation: r, Confidence: 0.5, Method: "rules"}
				byVenue[Venues[k]] = m.Matches[k]
			}
		}
		want := candleModes(&m)
		if got := candleModes(PriceItemMarket(&m)); got != want {
			t.Errorf("relations %q: the deps cache's projection gives modes %q, the row %q", rels, got, want)
		}
		for _, v := range []any{byVenue, m.Matches} {
			js, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if err := pool.QueryRow(ctx, `SELECT candle_modes($1::json)`, string(js)).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("relations %q as %s: candle_modes = %q, candleModes = %q", rels, js, got, want)
			}
		}
		for k, r := range rels {
			mode := map[string]byte{"": 'n', RelationIdentity: 'n', RelationComplement: 'i'}[r]
			if mode == 0 {
				mode = 'x'
			}
			if want[k] != mode {
				t.Errorf("relations %q: venue %d mode %q, want %q", rels, k, want[k], mode)
			}
		}
	}
}

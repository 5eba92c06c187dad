package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// t0 is the base time of the test data, at the database's microsecond precision.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)

// cet is a zone other than UTC: inputs given in it must be stored and read back in UTC.
var cet = time.FixedZone("CET", 3600)

// setup gives the test a migrated database of its own and a store on it.
func setup(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	dsn := testenv.Database(t)
	if _, err := store.Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	pool, err := store.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool), pool
}

// missingDatabase returns the URL of a database that does not exist yet on the
// test server, and drops it when the test ends.
func missingDatabase(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Name("md_test_new_")
	u.Path = "/" + name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testenv.PostgresURL)
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return u.String()
}

// openSnapshot opens a snapshot of s and closes it when the test ends; failing to open
// or to close it fails the test.
func openSnapshot(t *testing.T, s *store.Store) *store.Snapshot {
	t.Helper()
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	t.Cleanup(func() {
		if err := snap.Close(context.Background()); err != nil {
			t.Errorf("close snapshot: %v", err)
		}
	})
	return snap
}

func apply(t *testing.T, s *store.Store, b *store.Batch) *store.Result {
	t.Helper()
	res, err := s.ApplyBatch(t.Context(), b)
	if err != nil {
		t.Fatalf("ApplyBatch: %v", err)
	}
	return res
}

func ptr[T any](v T) *T { return &v }

func newEvent(id string, version int64) store.Event {
	return store.Event{
		ID: id, Version: version, Title: fmt.Sprintf("Event %s v%d", id, version), Category: "politics",
		Status:    store.StatusActive,
		VenueIDs:  [4]*string{ptr("A-" + id), ptr("b-" + id), nil, nil},
		Volume:    1000 + float64(version),
		UpdatedAt: t0.Add(time.Duration(version) * time.Second),
	}
}

func newMarket(id, eventID string, version int64) store.Market {
	return store.Market{
		ID: id, EventID: eventID, Version: version, Title: fmt.Sprintf("Market %s v%d", id, version),
		Status:    store.StatusActive,
		Venues:    map[string]string{"venue_a": "A-" + id, "venue_c": "C-" + id},
		UpdatedAt: t0.Add(time.Duration(version) * time.Second),
	}
}

func newPrice(marketID string, version int64) store.Price {
	return store.Price{
		MarketID: marketID, Version: version, TS: t0.Add(time.Duration(version) * time.Second),
		Quotes: map[string]store.Quote{
			"venue_a": {Bid: ptr(0.25), Ask: ptr(0.5), Last: ptr(0.375), Volume24h: float64(version)},
			"venue_b": {Bid: nil, Ask: ptr(0.625), Last: nil, Volume24h: 0},
		},
	}
}

func newTrade(marketID, tradeID string, ts time.Time) store.Trade {
	return store.Trade{MarketID: marketID, TradeID: tradeID, Venue: "venue_b", Price: 0.5, Size: 10, Side: "buy", TS: ts}
}

// show renders v for comparison and messages: pointers by value, times in
// RFC 3339 with their zone (so a non-UTC time differs from its UTC twin).
// priceView is d as the price path carries it: the market projected to
// what its price item derives from (store.PriceItemMarket). Documents are
// compared this way wherever one side may come from a batch of prices.
func priceView(d store.MarketDoc) store.MarketDoc {
	d.Market = store.PriceItemMarket(d.Market)
	return d
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v: %+v>", err, v)
	}
	return string(b)
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("decode %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("decode %q: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// The row readers below use plain SQL, independent of the store's own reads.

func readEvent(t *testing.T, pool *pgxpool.Pool, id string) *store.Event {
	t.Helper()
	var e store.Event
	err := pool.QueryRow(t.Context(), `
		SELECT universal_id, version, title, category, status, merged_into,
		       venue_a_event_ticker, venue_b_event_slug, venue_c_event_id, venue_d_event_id,
		       volume, updated_at
		FROM events WHERE universal_id = $1`, id).Scan(
		&e.ID, &e.Version, &e.Title, &e.Category, &e.Status, &e.MergedInto,
		&e.VenueIDs[0], &e.VenueIDs[1], &e.VenueIDs[2], &e.VenueIDs[3], &e.Volume, &e.UpdatedAt)
	if err == pgx.ErrNoRows {
		return nil
	}
	if err != nil {
		t.Fatalf("read event %s: %v", id, err)
	}
	e.UpdatedAt = e.UpdatedAt.UTC()
	return &e
}

// readMarket returns the market row and its venues column as JSON text.
func readMarket(t *testing.T, pool *pgxpool.Pool, id string) (*store.Market, string) {
	t.Helper()
	var m store.Market
	var venues string
	err := pool.QueryRow(t.Context(), `
		SELECT universal_id, event_id, version, title, status, venues::text, resolved_at, result, updated_at
		FROM markets WHERE universal_id = $1`, id).Scan(
		&m.ID, &m.EventID, &m.Version, &m.Title, &m.Status, &venues, &m.ResolvedAt, &m.Result, &m.UpdatedAt)
	if err == pgx.ErrNoRows {
		return nil, ""
	}
	if err != nil {
		t.Fatalf("read market %s: %v", id, err)
	}
	if err := json.Unmarshal([]byte(venues), &m.Venues); err != nil {
		t.Fatalf("decode venues of %s: %v", id, err)
	}
	m.UpdatedAt = m.UpdatedAt.UTC()
	if m.ResolvedAt != nil {
		m.ResolvedAt = ptr(m.ResolvedAt.UTC())
	}
	return &m, venues
}

// readPrice returns the price row and its quotes column as JSON text.
func readPrice(t *testing.T, pool *pgxpool.Pool, marketID string) (*store.Price, string) {
	t.Helper()
	var p store.Price
	var quotes string
	err := pool.QueryRow(t.Context(), `
		SELECT market_id, version, ts, quotes::text FROM prices WHERE market_id = $1`, marketID).Scan(
		&p.MarketID, &p.Version, &p.TS, &quotes)
	if err == pgx.ErrNoRows {
		return nil, ""
	}
	if err != nil {
		t.Fatalf("read price %s: %v", marketID, err)
	}
	if err := json.Unmarshal([]byte(quotes), &p.Quotes); err != nil {
		t.Fatalf("decode quotes of %s: %v", marketID, err)
	}
	p.TS = p.TS.UTC()
	return &p, quotes
}

// readTrades returns every trade row, ascending by trade_id.
func readTrades(t *testing.T, pool *pgxpool.Pool) []store.Trade {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
		SELECT trade_id, market_id, venue, price, size, side, ts FROM trades ORDER BY trade_id COLLATE "C"`)
	if err != nil {
		t.Fatalf("read trades: %v", err)
	}
	var out []store.Trade
	var tr store.Trade
	if _, err := pgx.ForEachRow(rows, []any{&tr.TradeID, &tr.MarketID, &tr.Venue, &tr.Price, &tr.Size, &tr.Side, &tr.TS}, func() error {
		tr.TS = tr.TS.UTC()
		out = append(out, tr)
		return nil
	}); err != nil {
		t.Fatalf("read trades: %v", err)
	}
	return out
}

// tableJSON returns a whole table, every column included, as JSON text.
func tableJSON(t *testing.T, pool *pgxpool.Pool, table, key string) string {
	t.Helper()
	var s *string
	err := pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT json_agg(x ORDER BY %s COLLATE "C")::text FROM %s x`, key, table)).Scan(&s)
	if err != nil {
		t.Fatalf("read table %s: %v", table, err)
	}
	if s == nil {
		return "[]"
	}
	return *s
}

// appliedKeys lists the keys of a Result.Applied set, for messages.
func appliedKeys(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

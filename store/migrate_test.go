package store_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// allVersions is 1..SchemaVersion.
func allVersions() []int {
	var vs []int
	for v := 1; v <= store.SchemaVersion(); v++ {
		vs = append(vs, v)
	}
	return vs
}

// migrationRows returns how many schema_migrations rows each version has.
func migrationRows(t *testing.T, dsn string) map[int]int {
	t.Helper()
	pool, err := store.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer pool.Close()
	rows, err := pool.Query(t.Context(), `SELECT version, count(*) FROM schema_migrations GROUP BY version`)
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var v, n int
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		out[v] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantOneRowPerVersion(t *testing.T, dsn string) {
	t.Helper()
	got := migrationRows(t, dsn)
	if len(got) != store.SchemaVersion() {
		t.Errorf("schema_migrations holds versions %v, want 1..%d", got, store.SchemaVersion())
	}
	for _, v := range allVersions() {
		if got[v] != 1 {
			t.Errorf("schema_migrations rows for version %d: got %d, want 1", v, got[v])
		}
	}
}

func TestSchemaVersion(t *testing.T) {
	if got := store.SchemaVersion(); got < 1 {
		t.Fatalf("SchemaVersion() = %d, want >= 1", got)
	}
}

func TestMigrateCreatesMissingDatabase(t *testing.T) {
	t.Parallel()
	dsn := missingDatabase(t)

	applied, err := store.Migrate(t.Context(), dsn)
	if err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	if want := allVersions(); !slices.Equal(applied, want) {
		t.Errorf("first Migrate applied %v, want %v", applied, want)
	}
	if !slices.Contains(applied, 1) {
		t.Errorf("first Migrate applied %v, want version 1 among them", applied)
	}

	applied, err = store.Migrate(t.Context(), dsn)
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if len(applied) != 0 {
		t.Errorf("second Migrate applied %v, want nothing", applied)
	}
	wantOneRowPerVersion(t, dsn)
}

func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"missing database", missingDatabase},
		{"empty database", func(t *testing.T) string { return testenv.Database(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := tc.dsn(t)
			const n = 4
			var wg sync.WaitGroup
			errs := make([]error, n)
			applied := make([][]int, n)
			for i := range n {
				wg.Go(func() { applied[i], errs[i] = store.Migrate(t.Context(), dsn) })
			}
			wg.Wait()
			var all []int
			for i := range n {
				if errs[i] != nil {
					t.Errorf("Migrate #%d: %v", i, errs[i])
				}
				all = append(all, applied[i]...)
			}
			// Each version is applied by exactly one of the callers.
			slices.Sort(all)
			if want := allVersions(); !slices.Equal(all, want) {
				t.Errorf("versions applied across callers: got %v, want %v", all, want)
			}
			wantOneRowPerVersion(t, dsn)
		})
	}
}

func TestCheckSchema(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t) // created empty, never migrated
	pool, err := store.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer pool.Close()
	s := store.New(pool)

	if err := s.CheckSchema(t.Context()); !errors.Is(err, store.ErrSchemaOutdated) {
		t.Fatalf("CheckSchema before Migrate: got %v, want ErrSchemaOutdated", err)
	}
	if _, err := store.Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if err := s.CheckSchema(t.Context()); err != nil {
		t.Fatalf("CheckSchema after Migrate: got %v, want nil", err)
	}
}

// A database migrated by a newer binary is neither outdated nor something an
// older binary may migrate: both refuse with an error (and do not panic).
func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	if _, err := store.Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	pool, err := store.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer pool.Close()
	markNewer(t, pool)

	err = store.New(pool).CheckSchema(t.Context())
	if err == nil || errors.Is(err, store.ErrSchemaOutdated) {
		t.Errorf("CheckSchema on a newer schema: got %v, want a non-outdated error", err)
	}
	applied, err := store.Migrate(t.Context(), dsn)
	if err == nil {
		t.Errorf("Migrate on a newer schema: got applied %v and no error, want an error", applied)
	}
}

func markNewer(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES ($1, 'future.sql')`,
		store.SchemaVersion()+1); err != nil {
		t.Fatalf("mark newer schema: %v", err)
	}
}

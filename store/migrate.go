package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("store: read embedded migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("store: migration %q is not named NNN_name.sql", e.Name())
		}
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("store: read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("store: migrations must be numbered 1..n without gaps; found %s at position %d", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the schema version this binary needs.
func SchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil {
		panic(err) // the embedded files are part of the binary; a bad name is a build bug
	}
	return len(ms)
}

// EnsureDatabase creates the database named in dsn when it does not exist,
// connecting to the server's "postgres" database to do so.
func EnsureDatabase(ctx context.Context, dsn string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("store: parse database url: %w", err)
	}
	name := cfg.Database
	if name == "" {
		return errors.New("store: the database url names no database")
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("store: connect to the postgres database to create %q: %w", name, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("store: look up database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	// A concurrent migrate won: duplicate_database when its CREATE committed
	// before ours looked, unique_violation on pg_database's name when both
	// were inserting at once.
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: create database %q: %w", name, err)
	}
	return nil
}

// Migrate creates the database if missing and applies every migration not yet
// applied, each in its own transaction, under an advisory lock so that
// concurrent runs are safe. It returns the versions it applied.
func Migrate(ctx context.Context, dsn string) ([]int, error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	if err := EnsureDatabase(ctx, dsn); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	defer conn.Close(ctx)
	const lockKey = 7262931 // arbitrary, constant: one migrator at a time
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockKey); err != nil {
		return nil, fmt.Errorf("store: take migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockKey) //nolint:errcheck // the lock also ends with the session, which the Close above ends

	if _, err := conn.Exec(ctx, `
		CREATE TABLE IF NOT EXISTS schema_migrations (
		    version    integer PRIMARY KEY,
		    name       text        NOT NULL,
		    applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
		return nil, fmt.Errorf("store: create schema_migrations: %w", err)
	}
	current, err := currentVersion(ctx, conn)
	if err != nil {
		return nil, err
	}
	if current > len(ms) {
		return nil, fmt.Errorf("store: database schema version %d is newer than this binary's %d; upgrade the binary", current, len(ms))
	}
	var applied []int
	for _, m := range ms[current:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("store: apply migration %s: %w", m.name, err)
		}
		applied = append(applied, m.version)
	}
	return applied, nil
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func currentVersion(ctx context.Context, q queryRower) (int, error) {
	var v int
	err := q.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never migrated
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read schema version: %w", err)
	}
	return v, nil
}

// CheckSchema returns ErrSchemaOutdated unless the database is at the schema
// version this binary needs.
func (s *Store) CheckSchema(ctx context.Context) error {
	v, err := currentVersion(ctx, s.pool)
	if err != nil {
		return err
	}
	if want := SchemaVersion(); v < want {
		return fmt.Errorf("%w (database at version %d, binary needs %d)", ErrSchemaOutdated, v, want)
	} else if v > want {
		return fmt.Errorf("store: database schema version %d is newer than this binary's %d; upgrade the binary", v, want)
	}
	return nil
}

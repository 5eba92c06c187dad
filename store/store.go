package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrSchemaOutdated means the database has not been migrated to the schema
// this binary needs; run `marketdata migrate`.
var ErrSchemaOutdated = errors.New("store: database schema is outdated; run `marketdata migrate`")

// Store reads and writes the source of truth.
type Store struct {
	pool *pgxpool.Pool
	// deps keeps the market and event rows of price items for ApplyBatch.
	deps *depsCache
	// stmts are ApplyBatch's statements for prices and trades, which also
	// write the candles (candlesql.go).
	stmts *batchStatements
}

// New wraps a pool. The pool's lifetime stays with the caller.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, deps: newDepsCache(defaultDepsCacheSize), stmts: defaultBatchStatements}
}

// Open opens a pool on dsn without dialling: connections are made on first
// use and again after a failure, so a long-running process can start while
// the database is down and recover by itself when it answers.
func Open(dsn string) (*pgxpool.Pool, error) { return OpenSized(dsn, 0) }

// OpenSized is Open with at most maxConns connections (0: pgxpool's default
// or the URL's pool_max_conns).
func OpenSized(dsn string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open pool: %w", err)
	}
	return pool, nil
}

// Connect opens a pool on dsn and checks that it answers.
func Connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	pool, err := Open(dsn)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		cfg := pool.Config().ConnConfig
		pool.Close()
		return nil, fmt.Errorf("store: connect to %s@%s/%s: %w", cfg.User, cfg.Host, cfg.Database, err)
	}
	return pool, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.pool.Ping(ctx)
}

// IsUnavailable reports whether err means the database could not be reached
// or is not accepting work (down, restarting, shutting down, a timeout),
// rather than a refusal of the statement itself. Callers may then answer
// from elsewhere (the other database, a copy in memory).
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	if pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-57P03: admin shutdown,
		// crash shutdown, cannot connect now (starting or stopping).
		return len(pe.Code) == 5 && pe.Code[:2] == "08" ||
			pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return false
}

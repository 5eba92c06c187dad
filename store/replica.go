package store

import (
	"context"
	"sync/atomic"
	"time"
)

// DefaultReplicaBackoff is how long an API node skips a read replica that
// failed: one timeout per second at most while it hangs.
const DefaultReplicaBackoff = time.Second

// ReplicaReads answers the API's reads from a read replica and, while the
// replica cannot be reached, from the primary: a replica outage degrades a
// node, it does not take its cache misses down. After a failed replica read
// the replica is skipped for Backoff (so a replica that hangs costs one
// timeout per Backoff, not one per request), then tried again.
type ReplicaReads struct {
	Replica *Store
	Primary *Store
	// Backoff is how long the replica is skipped after it failed
	// (DefaultReplicaBackoff in production); 0 skips it never: every read
	// tries the replica first.
	Backoff time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// OnFallback, when set, is called for each read the primary answered
	// because the replica could not.
	OnFallback func(err error)

	skipUntil atomic.Int64 // unix nanoseconds
}

func (r *ReplicaReads) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// useReplica reports whether the replica is not in its backoff.
func (r *ReplicaReads) useReplica() bool {
	return r.now().UnixNano() >= r.skipUntil.Load()
}

// failed records a replica failure; true when err means the replica is
// unavailable and the read should go to the primary.
func (r *ReplicaReads) failed(err error) bool {
	if !IsUnavailable(err) {
		return false
	}
	r.skipUntil.Store(r.now().Add(r.Backoff).UnixNano())
	if r.OnFallback != nil {
		r.OnFallback(err)
	}
	return true
}

// readFrom runs fn on the replica unless it is in its backoff or unavailable,
// then on the primary.
func readFrom[T any](r *ReplicaReads, fn func(*Store) (T, error)) (T, error) {
	if r.useReplica() {
		v, err := fn(r.Replica)
		if err == nil || !r.failed(err) {
			return v, err
		}
	} else if r.OnFallback != nil {
		r.OnFallback(nil)
	}
	return fn(r.Primary)
}

// EventDocsByID reads event documents (see Store.EventDocsByID).
func (r *ReplicaReads) EventDocsByID(ctx context.Context, ids []string) ([]EventDoc, error) {
	return readFrom(r, func(s *Store) ([]EventDoc, error) { return s.EventDocsByID(ctx, ids) })
}

// MarketDocsByID reads market documents (see Store.MarketDocsByID).
func (r *ReplicaReads) MarketDocsByID(ctx context.Context, ids []string) ([]MarketDoc, error) {
	return readFrom(r, func(s *Store) ([]MarketDoc, error) { return s.MarketDocsByID(ctx, ids) })
}

// NewestTrades reads a market's newest trades (see Store.NewestTrades).
func (r *ReplicaReads) NewestTrades(ctx context.Context, marketID string, limit int) ([]Trade, error) {
	return readFrom(r, func(s *Store) ([]Trade, error) { return s.NewestTrades(ctx, marketID, limit) })
}

// ListedEvents reads a listing page (see Store.ListedEvents).
func (r *ReplicaReads) ListedEvents(ctx context.Context, f ListFilter, after string, limit int) ([]Event, error) {
	return readFrom(r, func(s *Store) ([]Event, error) { return s.ListedEvents(ctx, f, after, limit) })
}

// Candles reads a market's candles (see Store.Candles).
func (r *ReplicaReads) Candles(ctx context.Context, marketID, interval, series string, from, to time.Time) ([]Candle, error) {
	return readFrom(r, func(s *Store) ([]Candle, error) { return s.Candles(ctx, marketID, interval, series, from, to) })
}

package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// TestIsUnavailable: a database nobody listens on, or that does not answer
// in time, is unavailable; a statement the database refuses is not.
func TestIsUnavailable(t *testing.T) {
	s, pool := setup(t)
	down := downStore(t)
	ctx := context.Background()

	_, err := down.EventDocsByID(ctx, []string{"ev_1"})
	if !store.IsUnavailable(err) {
		t.Errorf("refused connection: IsUnavailable(%v) = false, want true", err)
	}
	_, err = pool.Exec(ctx, "SELECT no_such_column FROM events")
	if err == nil || store.IsUnavailable(err) {
		t.Errorf("refused statement: IsUnavailable(%v) = true, want false", err)
	}
	if store.IsUnavailable(nil) || store.IsUnavailable(errors.New("other")) {
		t.Error("nil or an unrelated error reported unavailable")
	}
	tctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-tctx.Done()
	if err := s.Ping(tctx); !store.IsUnavailable(err) {
		t.Errorf("deadline: IsUnavailable(%v) = false, want true", err)
	}
}

// downStore is a store on a port where nothing listens.
func downStore(t *testing.T) *store.Store {
	t.Helper()
	pool, err := store.Open(fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=2", testenv.FreePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool)
}

// TestReplicaReadsFallBack: with the replica down, reads come from the
// primary; the replica is skipped for the backoff after a failure and
// tried again after it.
func TestReplicaReadsFallBack(t *testing.T) {
	primary, _ := setup(t)
	ctx := context.Background()
	apply(t, primary, &store.Batch{Events: []store.Event{newEvent("ev_1", 1)}})
	now := time.Now()
	var fell []error
	r := &store.ReplicaReads{
		Replica: downStore(t), Primary: primary, Backoff: time.Second,
		Now:        func() time.Time { return now },
		OnFallback: func(err error) { fell = append(fell, err) },
	}
	for i := range 3 {
		docs, err := r.EventDocsByID(ctx, []string{"ev_1"})
		if err != nil || len(docs) != 1 || docs[0].Event == nil {
			t.Fatalf("read %d with the replica down: %v, %v; want ev_1 from the primary", i, show(docs), err)
		}
	}
	if len(fell) != 3 || fell[0] == nil || fell[1] != nil || fell[2] != nil {
		t.Errorf("fallbacks: %v; want the first with the replica's error, then two skipped (nil)", fell)
	}
	now = now.Add(time.Second)
	if _, err := r.EventDocsByID(ctx, []string{"ev_1"}); err != nil || len(fell) != 4 || fell[3] == nil {
		t.Errorf("after the backoff: %v, fallbacks %v; want the replica tried again", err, fell)
	}
}

// TestReplicaReadsNoBackoff: Backoff 0 means the replica is never skipped:
// every read tries it first (0 is not taken for a default).
func TestReplicaReadsNoBackoff(t *testing.T) {
	primary, _ := setup(t)
	ctx := context.Background()
	apply(t, primary, &store.Batch{Events: []store.Event{newEvent("ev_1", 1)}})
	var fell []error
	r := &store.ReplicaReads{
		Replica: downStore(t), Primary: primary,
		OnFallback: func(err error) { fell = append(fell, err) },
	}
	for i := range 2 {
		if _, err := r.EventDocsByID(ctx, []string{"ev_1"}); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if len(fell) != 2 || fell[0] == nil || fell[1] == nil {
		t.Errorf("fallbacks: %v; want both with the replica's error (tried each time)", fell)
	}
}

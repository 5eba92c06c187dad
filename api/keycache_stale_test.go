package api

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/marketdata/marketdata/store"
)

// downCredentials answers cred, or fails with err when it is set.
type downCredentials struct {
	cred  atomic.Pointer[store.Credential]
	err   atomic.Pointer[error]
	calls atomic.Int32
}

func (d *downCredentials) CredentialByHash(context.Context, []byte) (*store.Credential, error) {
	d.calls.Add(1)
	if e := d.err.Load(); e != nil {
		return nil, *e
	}
	if c := d.cred.Load(); c != nil {
		return c, nil
	}
	return nil, store.ErrNotFound
}

func (d *downCredentials) fail(err error) { d.err.Store(&err) }

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// TestKeyCacheServesStaleWhilePostgresDown: with Postgres unreachable, a key
// fetched within the stale bound keeps working past the TTL, also after a
// flush (NATS reconnect); a key a notice dropped, an unknown secret, a
// record older than the bound, and a failure that is not about
// connectivity all refuse (an error, so 503).
func TestKeyCacheServesStaleWhilePostgresDown(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	src := &downCredentials{}
	live := &store.Credential{Key: store.Key{ID: "key_1"}, Account: store.Account{ID: "acc_1", AccessGranted: true}}
	other := &store.Credential{Key: store.Key{ID: "key_2"}, Account: store.Account{ID: "acc_2", AccessGranted: true}}
	k := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: keyCacheSize, Now: clock,
		StaleMax: time.Minute, ServedStale: prometheus.NewCounter(prometheus.CounterOpts{Name: "stale_total"})})
	ctx := context.Background()
	get := func(h string) (*store.Credential, error) {
		t.Helper()
		rec, err := k.get(ctx, []byte(h))
		return rec.credential(), err
	}

	src.cred.Store(live)
	if _, err := get("h1"); err != nil {
		t.Fatal(err)
	}
	src.cred.Store(other)
	if _, err := get("h2"); err != nil {
		t.Fatal(err)
	}
	src.cred.Store(nil)
	if c, err := get("unknown"); err != nil || c != nil {
		t.Fatalf("unknown secret: %v, %v; want nil, nil", c, err)
	}

	src.fail(errRefused)
	now.Add(int64(11 * time.Second)) // past the TTL and the negative TTL
	if c, err := get("h1"); err != nil || c != live {
		t.Fatalf("key within the stale bound, Postgres down: got %v, %v; want the cached record", c, err)
	}
	k.flush()
	if c, err := get("h1"); err != nil || c != live {
		t.Errorf("after a flush, Postgres down: got %v, %v; want the stale record", c, err)
	}
	if got := counterValue(t, k.servedStale); got != 2 {
		t.Errorf("stale answers counted: got %v, want 2", got)
	}
	if _, err := get("unknown"); err == nil {
		t.Error("unknown secret, Postgres down: got no error, want one (never valid, never stale)")
	}
	k.invalidate("acc_2", "")
	if _, err := get("h2"); err == nil {
		t.Error("key dropped by a notice, Postgres down: got no error, want one")
	}
	now.Add(int64(time.Minute))
	if _, err := get("h1"); err == nil {
		t.Error("record older than the stale bound: got no error, want one")
	}

	// A refusal that is not about reaching the database is not papered over.
	k2 := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: keyCacheSize, Now: clock, StaleMax: time.Minute})
	src.err.Store(nil)
	src.cred.Store(live)
	if _, err := k2.get(ctx, []byte("h1")); err != nil {
		t.Fatal(err)
	}
	src.fail(errors.New("ERROR: relation does not exist"))
	now.Add(int64(11 * time.Second))
	if _, err := k2.get(ctx, []byte("h1")); err == nil {
		t.Error("query error (not connectivity): got no error, want one")
	}

	// Postgres back: the record is looked up again and the fresh one used.
	src.err.Store(nil)
	revoked := *live
	at := clock()
	revoked.Key.RevokedAt = &at
	src.cred.Store(&revoked)
	now.Add(int64(2 * downRetry))
	if rec, err := k2.get(ctx, []byte("h1")); err != nil || rec.credential().Key.RevokedAt == nil {
		t.Errorf("Postgres back: got %v, %v; want the fresh (revoked) record", rec, err)
	}
}

// TestKeyCacheStaleOff: with MD_KEY_STALE_MAX=0 nothing is served stale.
func TestKeyCacheStaleOff(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	src := &downCredentials{}
	src.cred.Store(&store.Credential{Key: store.Key{ID: "key_1"}})
	k := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: keyCacheSize, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if _, err := k.get(context.Background(), []byte("h")); err != nil {
		t.Fatal(err)
	}
	src.fail(errRefused)
	now.Add(int64(11 * time.Second))
	if _, err := k.get(context.Background(), []byte("h")); err == nil {
		t.Error("stale off, Postgres down, past the TTL: got no error, want one")
	}
}

// TestKeyCacheDownSkipsLookups: while Postgres is down, stale records are
// served without a lookup per request (one per downRetry).
func TestKeyCacheDownSkipsLookups(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	src := &downCredentials{}
	src.cred.Store(&store.Credential{Key: store.Key{ID: "key_1"}})
	k := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: keyCacheSize, Now: func() time.Time { return time.Unix(0, now.Load()) },
		StaleMax: time.Minute})
	if _, err := k.get(context.Background(), []byte("h")); err != nil {
		t.Fatal(err)
	}
	src.fail(errRefused)
	now.Add(int64(11 * time.Second))
	for range 100 {
		if _, err := k.get(context.Background(), []byte("h")); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := src.calls.Load(), int32(2); got != want {
		t.Errorf("lookups: got %d, want %d (one fetch, one failed refresh)", got, want)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

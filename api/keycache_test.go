package api

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// slowCredentials answers from cred, after release is closed when gate is set.
type slowCredentials struct {
	cred    atomic.Pointer[store.Credential]
	started chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (s *slowCredentials) CredentialByHash(ctx context.Context, _ []byte) (*store.Credential, error) {
	c := s.cred.Load() // read "the database" first, like a query would
	if s.calls.Add(1) == 1 && s.release != nil {
		close(s.started)
		<-s.release
	}
	if c == nil {
		return nil, store.ErrNotFound
	}
	return c, nil
}

// TestKeyCacheNoticeDuringFetch: a notice that arrives while a lookup is in
// flight (the lookup read the record before the change committed) must not be
// undone by that lookup storing its stale record afterwards; otherwise a
// revoked key stays usable for the whole TTL instead of < 1 s.
func TestKeyCacheNoticeDuringFetch(t *testing.T) {
	src := &slowCredentials{started: make(chan struct{}), release: make(chan struct{})}
	live := &store.Credential{Key: store.Key{ID: "key_1", ExpiresAt: time.Now().Add(time.Hour)}, Account: store.Account{ID: "acc_1", AccessGranted: true}}
	src.cred.Store(live)
	k := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: keyCacheSize, Now: time.Now})
	hash := []byte("hash-of-the-secret")

	done := make(chan *store.Credential)
	go func() {
		rec, err := k.get(context.Background(), hash)
		if err != nil {
			t.Errorf("get: %v", err)
		}
		done <- rec.credential()
	}()
	<-src.started
	// The key is revoked and the notice handled while the lookup is in flight.
	revoked := *live
	now := time.Now()
	revoked.Key.RevokedAt = &now
	src.cred.Store(&revoked)
	k.invalidate("acc_1", "key_1")
	close(src.release)
	<-done

	rec, err := k.get(context.Background(), hash)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.credential(); got == nil || got.Key.RevokedAt == nil {
		t.Errorf("after the notice: cached record %+v, want the revoked one (a fresh lookup)", rec.credential())
	}
}

// TestKeyCacheTTL: entries are reused within the TTL, negative ones within
// the shorter negative TTL, and looked up again after.
func TestKeyCacheTTL(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	src := &slowCredentials{}
	src.cred.Store(&store.Credential{Key: store.Key{ID: "key_1"}, Account: store.Account{ID: "acc_1"}})
	k := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: keyCacheSize, Now: clock})
	get := func() {
		t.Helper()
		if _, err := k.get(context.Background(), []byte("h")); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		advance time.Duration
		calls   int32
	}{
		{0, 1}, {9 * time.Second, 1}, {time.Second, 2}, {5 * time.Second, 2},
	}
	for i, s := range steps {
		now.Add(int64(s.advance))
		get()
		if got := src.calls.Load(); got != s.calls {
			t.Fatalf("step %d: lookups = %d, want %d", i, got, s.calls)
		}
	}
	src.cred.Store(nil)
	k.flush()
	get()
	get()
	if got, want := src.calls.Load(), int32(3); got != want {
		t.Errorf("unknown key: lookups = %d, want %d (cached as unknown)", got, want)
	}
	now.Add(int64(2 * time.Second))
	get()
	if got, want := src.calls.Load(), int32(4); got != want {
		t.Errorf("unknown key after the negative TTL: lookups = %d, want %d", got, want)
	}
}

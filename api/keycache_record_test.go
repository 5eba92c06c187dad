package api

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// countingRender renders a record's answer from its key id and scopes, and
// counts the renders.
type countingRender struct{ n atomic.Int32 }

func (r *countingRender) render(c *store.Credential) ([]byte, error) {
	r.n.Add(1)
	return fmt.Appendf(nil, "%s %v", c.Key.ID, c.Key.Scopes), nil
}

// TestKeyCacheRendersOncePerRecord: the /key answer is rendered when a
// record is fetched and served with it until the record goes: a notice or a
// flush brings a new record, rendered anew from what it says.
func TestKeyCacheRendersOncePerRecord(t *testing.T) {
	src := &downCredentials{}
	src.cred.Store(&store.Credential{Key: store.Key{ID: "key_1", Scopes: []string{"markets:read"}}, Account: store.Account{ID: "acc_1"}})
	r := &countingRender{}
	k := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: keyCacheSize, Now: time.Now, Render: r.render})
	get := func() *keyRecord {
		t.Helper()
		rec, err := k.get(context.Background(), []byte("h"))
		if err != nil || rec == nil {
			t.Fatalf("get: %v, %v", rec, err)
		}
		return rec
	}
	first := get()
	for range 3 {
		if rec := get(); rec != first {
			t.Fatal("a cached record was replaced without a lookup")
		}
	}
	if got := string(first.body); got != "key_1 [markets:read]" || r.n.Load() != 1 {
		t.Errorf("body %q after %d renders; want %q rendered once", got, r.n.Load(), "key_1 [markets:read]")
	}

	src.cred.Store(&store.Credential{Key: store.Key{ID: "key_1", Scopes: []string{}}, Account: store.Account{ID: "acc_1"}})
	k.invalidate("acc_1", "")
	if got := string(get().body); got != "key_1 []" || r.n.Load() != 2 {
		t.Errorf("after a notice: body %q after %d renders; want %q, rendered a second time", got, r.n.Load(), "key_1 []")
	}
	k.flush()
	get()
	get()
	if got := r.n.Load(); got != 3 || src.calls.Load() != 3 {
		t.Errorf("after a flush: %d renders, %d lookups; want 3 of each (one more, then cached)", got, src.calls.Load())
	}
}

// TestKeyCacheNoticeEndsNegativeEntries: an unknown secret is remembered as
// unknown, until any notice: a key created since must work at once.
func TestKeyCacheNoticeEndsNegativeEntries(t *testing.T) {
	src := &downCredentials{}
	k := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: keyCacheSize, Now: time.Now})
	for range 3 {
		if rec, err := k.get(context.Background(), []byte("h")); err != nil || rec != nil {
			t.Fatalf("unknown secret: got %v, %v; want nil, nil", rec, err)
		}
	}
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("lookups of an unknown secret: %d, want 1 (cached as unknown)", got)
	}
	src.cred.Store(&store.Credential{Key: store.Key{ID: "key_new"}, Account: store.Account{ID: "acc_9"}})
	k.invalidate("acc_9", "key_new")
	if rec, err := k.get(context.Background(), []byte("h")); err != nil || rec.credential() == nil || rec.cred.Key.ID != "key_new" {
		t.Errorf("after the new key's notice: got %v, %v; want key_new", rec, err)
	}
}

// TestKeyCacheBounded: the cache holds at most its size; an evicted secret
// is only looked up again, and entries leave once they may no longer be
// served (after the TTL, stale bound 0).
func TestKeyCacheBounded(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	src := &downCredentials{}
	src.cred.Store(&store.Credential{Key: store.Key{ID: "key_1"}, Account: store.Account{ID: "acc_1"}})
	const size = 100
	k := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: size, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	for i := range 10 * size {
		if rec, err := k.get(context.Background(), fmt.Appendf(nil, "h%d", i)); err != nil || rec.credential() == nil {
			t.Fatalf("secret %d: got %v, %v", i, rec, err)
		}
	}
	k.entries.CleanUp()
	if got := k.entries.EstimatedSize(); got > size {
		t.Errorf("entries after %d secrets: %d, want at most %d", 10*size, got, size)
	}
	calls := src.calls.Load()
	if rec, err := k.get(context.Background(), []byte("h0")); err != nil || rec.credential() == nil {
		t.Errorf("an early secret, likely evicted: got %v, %v; want its record", rec, err)
	}
	if got := src.calls.Load() - calls; got > 1 {
		t.Errorf("lookups for one get: %d", got)
	}
	now.Add(int64(10 * time.Second))
	k.entries.CleanUp()
	if got := k.entries.EstimatedSize(); got != 0 {
		t.Errorf("entries past the TTL (no stale bound): %d, want 0", got)
	}
}

// TestKeyCacheObservesVersion: the first credentials version read is the
// baseline; each move of it makes records be looked up again, a repeat does
// not.
func TestKeyCacheObservesVersion(t *testing.T) {
	src := &downCredentials{}
	src.cred.Store(&store.Credential{Key: store.Key{ID: "key_1"}, Account: store.Account{ID: "acc_1"}})
	k := newKeyCache(src, keyCacheOptions{TTL: 10 * time.Second, Size: keyCacheSize, Now: time.Now})
	get := func() {
		t.Helper()
		if _, err := k.get(context.Background(), []byte("h")); err != nil {
			t.Fatal(err)
		}
	}
	get()
	for i, step := range []struct {
		version int64
		lookups int32
	}{{7, 1}, {7, 1}, {8, 2}, {8, 2}, {3, 3}} {
		k.observeVersion(step.version)
		get()
		if got := src.calls.Load(); got != step.lookups {
			t.Errorf("step %d (version %d): %d lookups, want %d", i, step.version, got, step.lookups)
		}
	}
	if got := k.version.Load(); got != 3 {
		t.Errorf("version observed: %d, want 3", got)
	}
}

package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/marketdata/marketdata/store"
)

// Credentials is what authentication reads from the store.
type Credentials interface {
	CredentialByHash(ctx context.Context, hash []byte) (*store.Credential, error)
}

var _ Credentials = (*store.Store)(nil)

// keyCache keeps key and account records in the node, so the steady-state
// hot path makes no Postgres query. Entries are dropped by change notices
// (key revoked, access changed) within milliseconds; the TTL is the safety net
// for a notice that never arrived. Unknown secrets are cached briefly too, so
// a flood of bad keys cannot reach Postgres more than the failed-auth limit
// allows anyway.
type keyCache struct {
	src    Credentials
	ttl    time.Duration
	negTTL time.Duration
	max    int
	now    func() time.Time
	group  singleflight.Group

	mu      sync.RWMutex
	entries map[[sha256.Size]byte]cacheEntry
	// gen counts invalidations. A lookup that began before one may have
	// read the record before the change committed: it neither stores its
	// answer nor is joined by lookups that begin after.
	gen uint64
}

type cacheEntry struct {
	cred    *store.Credential // nil: no key has this hash
	fetched time.Time
}

func newKeyCache(src Credentials, ttl time.Duration, now func() time.Time) *keyCache {
	return &keyCache{
		src: src, ttl: ttl, negTTL: min(ttl, 2*time.Second), max: 100_000, now: now,
		entries: map[[sha256.Size]byte]cacheEntry{},
	}
}

// get returns the credential for a secret hash; nil when no key has it.
func (k *keyCache) get(ctx context.Context, hash []byte) (*store.Credential, error) {
	var h [sha256.Size]byte
	copy(h[:], hash)
	now := k.now()
	k.mu.RLock()
	e, ok := k.entries[h]
	gen := k.gen
	k.mu.RUnlock()
	if ok {
		ttl := k.ttl
		if e.cred == nil {
			ttl = k.negTTL
		}
		if now.Sub(e.fetched) < ttl {
			return e.cred, nil
		}
	}
	v, err, _ := k.group.Do(string(h[:])+strconv.FormatUint(gen, 36), func() (any, error) {
		cred, err := k.src.CredentialByHash(ctx, hash)
		if errors.Is(err, store.ErrNotFound) {
			cred, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		k.put(h, cacheEntry{cred: cred, fetched: now}, gen)
		return cred, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*store.Credential), nil
}

func (k *keyCache) put(h [sha256.Size]byte, e cacheEntry, gen uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if gen != k.gen {
		return
	}
	if len(k.entries) >= k.max {
		now := k.now()
		for key, old := range k.entries {
			if old.cred == nil || now.Sub(old.fetched) >= k.ttl {
				delete(k.entries, key)
			}
		}
		if len(k.entries) >= k.max {
			clear(k.entries)
		}
	}
	k.entries[h] = e
}

// invalidate drops what is cached of an account (all its keys) or of one
// key, and every negative entry (a key just created must work at once).
func (k *keyCache) invalidate(accountID, keyID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	for h, e := range k.entries {
		if e.cred == nil || (accountID != "" && e.cred.Account.ID == accountID) || (keyID != "" && e.cred.Key.ID == keyID) {
			delete(k.entries, h)
		}
	}
}

// flush drops everything: after a NATS reconnect, notices may have been missed.
func (k *keyCache) flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	clear(k.entries)
}

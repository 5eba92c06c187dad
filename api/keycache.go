package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
//
// While Postgres cannot be reached, a key record fetched within staleMax is
// served stale (contract: "Degraded dependencies"): no revocation can commit
// meanwhile, and one committed just before arrives as a notice, which drops
// the record for good. A flush (notices may have been missed) only marks
// records as needing a lookup; they stay as the stale copy for the outage.
// Negative entries are never served stale.
type keyCache struct {
	src    Credentials
	ttl    time.Duration
	negTTL time.Duration
	max    int
	now    func() time.Time
	group  singleflight.Group

	// staleMax bounds how old a record may be and still be served while
	// Postgres is unreachable (MD_KEY_STALE_MAX); 0 serves none stale.
	staleMax time.Duration
	// fetchTimeout bounds one lookup, so a database that hangs answers
	// from the stale copy instead of holding requests.
	fetchTimeout time.Duration
	// servedStale counts answers given from a stale record (may be nil).
	servedStale prometheus.Counter
	log         *slog.Logger
	// downUntil (unix ns): after a lookup failed for want of the database,
	// records are served stale without a new lookup until then, so an
	// outage costs one failed lookup per interval, not one per request.
	downUntil atomic.Int64
	// stale is true while the node serves stale records (logged on change).
	stale atomic.Bool

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
	// revalidate: a flush happened since fetched; look the record up
	// before trusting it again (it may still be served stale).
	revalidate bool
}

// downRetry is how long lookups are skipped after one failed because the
// database could not be reached.
const downRetry = time.Second

func newKeyCache(src Credentials, ttl time.Duration, now func() time.Time) *keyCache {
	return &keyCache{
		src: src, ttl: ttl, negTTL: min(ttl, 2*time.Second), max: 100_000, now: now,
		fetchTimeout: 3 * time.Second,
		entries:      map[[sha256.Size]byte]cacheEntry{},
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
	if ok && !e.revalidate {
		ttl := k.ttl
		if e.cred == nil {
			ttl = k.negTTL
		}
		if now.Sub(e.fetched) < ttl {
			return e.cred, nil
		}
	}
	if ok && e.cred != nil && now.UnixNano() < k.downUntil.Load() {
		if cred, ok := k.staleCopy(h, now); ok {
			return cred, nil
		}
	}
	v, err, _ := k.group.Do(string(h[:])+strconv.FormatUint(gen, 36), func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.fetchTimeout)
		defer cancel()
		cred, err := k.src.CredentialByHash(fctx, hash)
		if errors.Is(err, store.ErrNotFound) {
			cred, err = nil, nil
		}
		if err != nil {
			if store.IsUnavailable(err) {
				k.downUntil.Store(k.now().Add(downRetry).UnixNano())
			}
			return nil, err
		}
		k.put(h, cacheEntry{cred: cred, fetched: now}, gen)
		if k.stale.CompareAndSwap(true, false) && k.log != nil {
			k.log.Info("keys are checked against postgres again")
		}
		return cred, nil
	})
	if err != nil {
		if store.IsUnavailable(err) {
			if cred, ok := k.staleCopy(h, now); ok {
				return cred, nil
			}
		}
		return nil, err
	}
	return v.(*store.Credential), nil
}

// staleCopy returns the record held for h if one may be served stale: it is
// a key (not an unknown secret), no notice dropped it, and it was fetched
// within staleMax.
func (k *keyCache) staleCopy(h [sha256.Size]byte, now time.Time) (*store.Credential, bool) {
	if k.staleMax <= 0 {
		return nil, false
	}
	k.mu.RLock()
	e, ok := k.entries[h]
	k.mu.RUnlock()
	if !ok || e.cred == nil || now.Sub(e.fetched) >= k.staleMax {
		return nil, false
	}
	if k.servedStale != nil {
		k.servedStale.Inc()
	}
	if k.stale.CompareAndSwap(false, true) && k.log != nil {
		k.log.Warn("postgres unreachable: serving keys from this node's memory", "key_stale_max", k.staleMax.String())
	}
	return e.cred, true
}

func (k *keyCache) put(h [sha256.Size]byte, e cacheEntry, gen uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if gen != k.gen {
		return
	}
	if len(k.entries) >= k.max {
		now := k.now()
		keep := max(k.ttl, k.staleMax)
		for key, old := range k.entries {
			if old.cred == nil || now.Sub(old.fetched) >= keep {
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
// What it drops is not served stale either: the notice may be a revocation.
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

// flush makes every record be looked up again before it is trusted: after a
// NATS reconnect or a credentials version change, notices may have been
// missed. Negative entries are dropped; key records stay as stale copies for
// a Postgres outage: no revocation commits while the primary is down, and a
// flush does not say which record changed. (Left open: a revocation whose
// notice is lost and whose commit the version poll sees in the last moment
// before the primary goes down is served stale until Postgres answers.)
func (k *keyCache) flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	for h, e := range k.entries {
		if e.cred == nil {
			delete(k.entries, h)
			continue
		}
		e.revalidate = true
		k.entries[h] = e
	}
}

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

	"github.com/maypok86/otter/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/marketdata/marketdata/store"
)

// Credentials is what authentication reads from the store.
type Credentials interface {
	CredentialByHash(ctx context.Context, hash []byte) (*store.Credential, error)
}

var _ Credentials = (*store.Store)(nil)

// keyCacheSize bounds how many secrets (keys and unknown ones) a node keeps.
const keyCacheSize = 100_000

// keyCache keeps key and account records in the node, so the steady-state
// hot path makes no Postgres query, with each record's rendered GET /key
// answer. Entries are dropped by change notices (key revoked, access
// changed) within milliseconds; the TTL is the safety net for a notice that
// never arrived. Unknown secrets are cached briefly too, so a flood of bad
// keys cannot reach Postgres more than the failed-auth limit allows anyway.
// The storage is bounded (otter: size and expiry); what it evicts is only
// looked up again.
//
// While Postgres cannot be reached, a key record fetched within staleMax is
// served stale (contract: "Degraded dependencies"): no revocation can commit
// meanwhile, and one committed just before arrives as a notice, which drops
// the record for good. A flush (notices may have been missed) only marks
// records as needing a lookup; they stay as the stale copy for the outage.
// Negative entries are never served stale.
//
// Invalidations are counted (gen). A lookup that began before one may have
// read the record before the change committed: it neither stores its answer
// nor is joined by lookups that begin after. Every invalidation and flush
// also ends every negative entry (a key just created must work at once): a
// negative entry holds only while gen has not moved since its lookup began.
type keyCache struct {
	src    Credentials
	ttl    time.Duration
	negTTL time.Duration
	now    func() time.Time
	group  singleflight.Group

	// staleMax bounds how old a record may be and still be served while
	// Postgres is unreachable (MD_KEY_STALE_MAX); 0 serves none stale.
	staleMax time.Duration
	// fetchTimeout bounds one lookup, so a database that hangs answers
	// from the stale copy instead of holding requests.
	fetchTimeout time.Duration
	// render is a record's GET /key answer, rendered once per fetched
	// record (nil: none rendered, getKey renders on demand).
	render func(*store.Credential) ([]byte, error)
	// servedStale counts answers given from a stale record (may be nil).
	servedStale prometheus.Counter
	log         *slog.Logger
	// downUntil (unix ns): after a lookup failed for want of the database,
	// records are served stale without a new lookup until then, so an
	// outage costs one failed lookup per interval, not one per request.
	downUntil atomic.Int64
	// stale is true while the node serves stale records (logged on change).
	stale atomic.Bool

	entries *otter.Cache[[sha256.Size]byte, keyEntry]
	// mu orders stores after invalidations: a store checks gen and writes
	// under it, so none lands after an invalidation that its lookup began
	// before.
	mu sync.Mutex
	// gen counts invalidations and flushes; flushed is gen right after the
	// last flush: records stored before it are looked up again before they
	// are trusted.
	gen, flushed atomic.Uint64
	// version is the credentials version last observed (-1: none yet).
	version atomic.Int64
	// onChange, if set, is told after every invalidation (the account or
	// key it named) and flush (both empty): open streams recheck their key.
	onChange func(accountID, keyID string)
}

// keyRecord is a key and account record with its GET /key answer.
type keyRecord struct {
	cred *store.Credential
	// body is the rendered GET /key answer (nil: not rendered).
	body []byte
}

// credential is the record's credential; nil for no record.
func (r *keyRecord) credential() *store.Credential {
	if r == nil {
		return nil
	}
	return r.cred
}

// keyEntry is what the cache holds for one secret hash.
type keyEntry struct {
	rec     *keyRecord // nil: no key has this hash
	fetched time.Time
	// gen is the keyCache's gen when the lookup that fetched it began.
	gen uint64
}

// downRetry is how long lookups are skipped after one failed because the
// database could not be reached.
const downRetry = time.Second

// keyCacheOptions are what a keyCache is built with beside its source.
type keyCacheOptions struct {
	// TTL is how long a fetched record is trusted (MD_KEY_CACHE_TTL).
	TTL time.Duration
	// StaleMax bounds how old a record may be served while Postgres is
	// unreachable (MD_KEY_STALE_MAX); 0 serves none stale.
	StaleMax time.Duration
	// Size bounds the secrets kept (keys and unknown ones).
	Size int
	// Now is the clock, for the TTLs as for the stale bound.
	Now func() time.Time
	// Log reports serving stale records and the end of it (nil: not told).
	Log *slog.Logger
	// Render is a record's GET /key answer (nil: none rendered).
	Render func(*store.Credential) ([]byte, error)
	// ServedStale counts answers given from a stale record (nil: none).
	ServedStale prometheus.Counter
	// OnChange is told after every invalidation and flush (nil: no one).
	OnChange func(accountID, keyID string)
}

// newKeyCache returns a cache of records read from src, complete as o says.
func newKeyCache(src Credentials, o keyCacheOptions) *keyCache {
	k := &keyCache{
		src: src, ttl: o.TTL, negTTL: min(o.TTL, 2*time.Second), now: o.Now,
		fetchTimeout: 3 * time.Second, staleMax: o.StaleMax, render: o.Render,
		servedStale: o.ServedStale, log: o.Log, onChange: o.OnChange,
	}
	k.version.Store(-1)
	k.entries = otter.Must(&otter.Options[[sha256.Size]byte, keyEntry]{
		MaximumSize: o.Size,
		// A record stays while it may still be served: fresh for ttl, stale
		// for staleMax; an unknown secret only for negTTL.
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[[sha256.Size]byte, keyEntry]) time.Duration {
			if e.Value.rec == nil {
				return k.negTTL
			}
			return max(k.ttl, k.staleMax)
		}),
		Clock: keyClock(o.Now),
	})
	return k
}

// keyClock is the cache's clock as otter reads it. It gives no ticks: the
// cache expires entries as it is used, and needs no goroutine of its own.
type keyClock func() time.Time

func (c keyClock) NowNano() int64                      { return c().UnixNano() }
func (c keyClock) Tick(time.Duration) <-chan time.Time { return nil }

// get returns the record for a secret hash; nil when no key has it.
func (k *keyCache) get(ctx context.Context, hash []byte) (*keyRecord, error) {
	var h [sha256.Size]byte
	copy(h[:], hash)
	now := k.now()
	gen := k.gen.Load()
	e, ok := k.entries.GetIfPresent(h)
	if ok && e.rec == nil && e.gen != gen {
		ok = false // an invalidation since: unknown secrets are asked again
	}
	if ok && e.gen >= k.flushed.Load() {
		ttl := k.ttl
		if e.rec == nil {
			ttl = k.negTTL
		}
		if now.Sub(e.fetched) < ttl {
			return e.rec, nil
		}
	}
	if ok && e.rec != nil && now.UnixNano() < k.downUntil.Load() {
		if rec, ok := k.staleCopy(h, now); ok {
			return rec, nil
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
		rec := k.record(cred)
		k.put(h, keyEntry{rec: rec, fetched: now, gen: gen})
		if k.stale.CompareAndSwap(true, false) && k.log != nil {
			k.log.Info("keys are checked against postgres again")
		}
		return rec, nil
	})
	if err != nil {
		if store.IsUnavailable(err) {
			if rec, ok := k.staleCopy(h, now); ok {
				return rec, nil
			}
		}
		return nil, err
	}
	return v.(*keyRecord), nil
}

// record is the cached form of a fetched credential (nil: unknown secret),
// its /key answer rendered now, once for every request it will serve.
func (k *keyCache) record(cred *store.Credential) *keyRecord {
	if cred == nil {
		return nil
	}
	rec := &keyRecord{cred: cred}
	if k.render != nil {
		if body, err := k.render(cred); err == nil {
			rec.body = body
		}
	}
	return rec
}

// staleCopy returns the record held for h if one may be served stale: it is
// a key (not an unknown secret), no notice dropped it, and it was fetched
// within staleMax.
func (k *keyCache) staleCopy(h [sha256.Size]byte, now time.Time) (*keyRecord, bool) {
	if k.staleMax <= 0 {
		return nil, false
	}
	e, ok := k.entries.GetIfPresent(h)
	if !ok || e.rec == nil || now.Sub(e.fetched) >= k.staleMax {
		return nil, false
	}
	if k.servedStale != nil {
		k.servedStale.Inc()
	}
	if k.stale.CompareAndSwap(false, true) && k.log != nil {
		k.log.Warn("postgres unreachable: serving keys from this node's memory", "key_stale_max", k.staleMax.String())
	}
	return e.rec, true
}

// put stores e unless an invalidation or flush happened since its lookup
// began.
func (k *keyCache) put(h [sha256.Size]byte, e keyEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e.gen != k.gen.Load() {
		return
	}
	k.entries.Set(h, e)
}

// invalidate drops what is cached of an account (all its keys) or of one
// key, and ends every negative entry (a key just created must work at once).
// What it drops is not served stale either: the notice may be a revocation.
func (k *keyCache) invalidate(accountID, keyID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen.Add(1)
	var drop [][sha256.Size]byte
	for h, e := range k.entries.All() {
		if c := e.rec.credential(); c != nil && ((accountID != "" && c.Account.ID == accountID) || (keyID != "" && c.Key.ID == keyID)) {
			drop = append(drop, h)
		}
	}
	for _, h := range drop {
		k.entries.Invalidate(h)
	}
	if k.onChange != nil {
		k.onChange(accountID, keyID)
	}
}

// flush makes every record be looked up again before it is trusted: after a
// NATS reconnect or a credentials version change, notices may have been
// missed. Negative entries end; key records stay as stale copies for a
// Postgres outage: no revocation commits while the primary is down, and a
// flush does not say which record changed. (Left open: a revocation whose
// notice is lost and whose commit the version poll sees in the last moment
// before the primary goes down is served stale until Postgres answers.)
func (k *keyCache) flush() {
	k.mu.Lock()
	k.flushed.Store(k.gen.Add(1))
	k.mu.Unlock()
	if k.onChange != nil {
		k.onChange("", "")
	}
}

// observeVersion takes the credentials version the node just read (every
// key or account change moves it): when it moved since the last one, a
// notice may have been missed, so every record is looked up again (flush).
func (k *keyCache) observeVersion(v int64) {
	if last := k.version.Swap(v); last >= 0 && last != v {
		k.flush()
	}
}

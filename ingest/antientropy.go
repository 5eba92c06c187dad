package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// Redis replicates asynchronously: a cache write acknowledged by a master
// can vanish with it in a failover, and nothing rewrites the document until
// it changes again. The anti-entropy pass repairs that. It walks the
// documents' revisions in Postgres (doc_revs) a page at a time, reads the
// revisions Redis holds for the same documents and the windows of their
// trade lists in one pipeline, and rewrites only what is behind or missing,
// then publishes a change notice for it. In steady state a page costs one
// indexed Postgres read, one for trade windows and one Redis pipeline.

// AntiEntropyStore is what the pass reads from the source of truth.
type AntiEntropyStore interface {
	DocRevs(ctx context.Context, after string, limit int) ([]store.DocRev, error)
	TradeWindows(ctx context.Context, ids []string, limit int) (map[string]store.TradeWindow, error)
	EventDocsByID(ctx context.Context, ids []string) ([]store.EventDoc, error)
	MarketDocsByID(ctx context.Context, ids []string) ([]store.MarketDoc, error)
	NewestTrades(ctx context.Context, marketID string, limit int) ([]store.Trade, error)
}

// AntiEntropyCache is what the pass reads and writes in Redis.
type AntiEntropyCache interface {
	ListingComplete(ctx context.Context) (bool, error)
	ReadRevisions(ctx context.Context, events, markets []string) (cache.Revisions, error)
	ReadTradeWindows(ctx context.Context, markets []string) (map[string]cache.TradeWindow, error)
	MissingTrades(ctx context.Context, trades []store.Trade) (map[string][]store.Trade, error)
	ApplyDocs(ctx context.Context, events []store.EventDoc, markets []store.MarketDoc, trades []store.Trade) (notice.Change, error)
	TryLock(ctx context.Context, name, token string, ttl time.Duration) (release func(), ok bool, err error)
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, v string) error
	TopologyChanged() <-chan struct{}
}

var (
	_ AntiEntropyStore = (*store.Store)(nil)
	_ AntiEntropyCache = (*cache.Cache)(nil)
)

// AntiEntropyConfig sets the pace of the pass. Every field must be set
// (NewAntiEntropy refuses a value it cannot use); start from
// DefaultAntiEntropyConfig.
type AntiEntropyConfig struct {
	// Interval is the pause between two pages of the periodic walk. With
	// Page 1000 and 2 s, a store of 150,000 documents (50,000 events with
	// their markets) is walked in about 5 minutes.
	Interval time.Duration
	// Page is how many documents one step compares.
	Page int
	// NoticeSubject is where change notices for repaired documents go: the
	// worker's (Config.NoticeSubject).
	NoticeSubject string
	// Settle is how long the pass waits before it looks again at trades
	// it found missing from Redis. Ingest commits a batch to Postgres
	// before it writes Redis, so trades it is writing look missing for a
	// moment; only those still missing after Settle were lost. The wait
	// happens only on a page where trades looked missing.
	Settle time.Duration
}

// DefaultAntiEntropyConfig is the production pace and the default notice
// subject; the one home of these values.
func DefaultAntiEntropyConfig() AntiEntropyConfig {
	return AntiEntropyConfig{Interval: 2 * time.Second, Page: 1000, NoticeSubject: notice.ChangeSubject, Settle: time.Second}
}

// AntiEntropy is the background repair of the cache. One per ingest
// process; a lock in Redis lets one worker at a time compare a page, and the
// walk's position is shared in Redis, so N workers walk the store once.
type AntiEntropy struct {
	cfg     AntiEntropyConfig
	store   AntiEntropyStore
	cache   AntiEntropyCache
	nc      *nats.Conn
	metrics *AntiEntropyMetrics
	log     *slog.Logger
	trigger chan struct{}
	token   string // this process's name on the lock
}

// AntiEntropyDeps are the pass's collaborators; NC may be nil (no notices).
type AntiEntropyDeps struct {
	Store   AntiEntropyStore
	Cache   AntiEntropyCache
	NC      *nats.Conn
	Metrics *AntiEntropyMetrics
	Log     *slog.Logger
}

// NewAntiEntropy returns the pass; call Run. It refuses a cfg it cannot
// run with, naming the field.
func NewAntiEntropy(cfg AntiEntropyConfig, d AntiEntropyDeps) (*AntiEntropy, error) {
	switch {
	case cfg.Interval <= 0:
		return nil, fmt.Errorf("ingest: AntiEntropyConfig.Interval is %s, want a positive duration", cfg.Interval)
	case cfg.Page < 1:
		return nil, fmt.Errorf("ingest: AntiEntropyConfig.Page is %d, want at least 1", cfg.Page)
	case cfg.NoticeSubject == "":
		return nil, errors.New("ingest: AntiEntropyConfig.NoticeSubject is empty")
	case cfg.Settle <= 0 || cfg.Settle >= lockTTL/2:
		return nil, fmt.Errorf("ingest: AntiEntropyConfig.Settle is %s, want a positive duration under %s (the pass waits it holding its %s lock)", cfg.Settle, lockTTL/2, lockTTL)
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return &AntiEntropy{cfg: cfg, store: d.Store, cache: d.Cache, nc: d.NC, metrics: d.Metrics, log: d.Log,
		trigger: make(chan struct{}, 1), token: cache.NewLockToken()}, nil
}

// lockName is the Redis lock one worker holds while it compares a page;
// lockTTL bounds how long a lock lost with its holder (a killed worker, or
// a master that died before the release reached it) holds the others up.
const (
	lockName = "antientropy"
	lockTTL  = 15 * time.Second
)

// Trigger asks for a full pass at once (the ingest worker calls it when
// cache writes failed and then succeed again: Redis may have lost writes).
func (a *AntiEntropy) Trigger() {
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

// PassStats counts what a pass compared and rewrote.
type PassStats struct {
	Checked                               int
	Events, Listings, Markets, TradeLists int
}

// Repaired is the number of documents the pass rewrote.
func (s PassStats) Repaired() int { return s.Events + s.Markets + s.TradeLists }

func (s *PassStats) add(o PassStats) {
	s.Checked += o.Checked
	s.Events += o.Events
	s.Listings += o.Listings
	s.Markets += o.Markets
	s.TradeLists += o.TradeLists
}

// WatchWrites returns c with its writes watched: the first write that
// succeeds after one failed triggers a full pass, since Redis may have lost
// acknowledged writes meanwhile (a failover, a restart). Hand it to the
// worker in place of c.
func (a *AntiEntropy) WatchWrites(c Cache) Cache { return &watchedCache{Cache: c, ae: a} }

type watchedCache struct {
	Cache
	ae     *AntiEntropy
	failed atomic.Bool
}

func (w *watchedCache) Apply(ctx context.Context, res *store.Result) (notice.Change, error) {
	n, err := w.Cache.Apply(ctx, res)
	if err != nil {
		w.failed.Store(true)
	} else if w.failed.CompareAndSwap(true, false) {
		w.ae.Trigger()
	}
	return n, err
}

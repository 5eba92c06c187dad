package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
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

// Run walks the store a page every Interval until ctx is done, and makes a
// full pass at once after a Redis topology change (a failover) or Trigger.
// A full pass that fails (the cluster still settling) is tried again every
// Interval until one succeeds.
func (a *AntiEntropy) Run(ctx context.Context) {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	urgent := false
	// Failures are logged when they start and when they end, not on every
	// try: Redis or Postgres being down is reported elsewhere too.
	failing := false
	failed := func(err error) {
		if ctx.Err() == nil && !failing {
			a.log.Warn("anti-entropy cannot run; trying again every interval", "err", err, "interval", a.cfg.Interval.String())
		}
		failing = true
	}
	recovered := func() {
		if failing {
			a.log.Info("anti-entropy runs again")
		}
		failing = false
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.cache.TopologyChanged():
			a.log.Info("redis topology changed: anti-entropy pass starts")
			urgent = true
		case <-a.trigger:
			urgent = true
		case <-t.C:
		}
		if urgent {
			st, err := a.Pass(ctx)
			if err != nil {
				failed(err)
				continue
			}
			recovered()
			urgent = false
			a.log.Info("anti-entropy pass done", "checked", st.Checked, "repaired_events", st.Events,
				"repaired_listings", st.Listings, "repaired_markets", st.Markets, "repaired_trade_lists", st.TradeLists)
			continue
		}
		if _, err := a.Step(ctx); err != nil {
			failed(err)
		} else {
			recovered()
		}
	}
}

// Pass compares every document, from the first, and repairs what is behind.
func (a *AntiEntropy) Pass(ctx context.Context) (PassStats, error) {
	var total PassStats
	started := time.Now()
	after := ""
	for {
		var (
			st   PassStats
			next string
			done bool
		)
		ran, err := a.withLock(ctx, func() error {
			var err error
			st, next, done, err = a.comparePage(ctx, after)
			return err
		})
		if errors.Is(err, errIncomplete) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		if !ran {
			// Another worker holds the lock for a moment: wait for it.
			select {
			case <-ctx.Done():
				return total, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		total.add(st)
		if done {
			a.passDone(started)
			return total, nil
		}
		after = next
	}
}

// Step compares the next page of the walk that workers share, under the
// lock; when another worker holds it, Step does nothing. The shared
// position is "<walk start, unix ns>|<last document name>"; it is read and
// written while the lock is held, so no two workers compare the same page
// and the position never moves backwards.
func (a *AntiEntropy) Step(ctx context.Context) (PassStats, error) {
	var st PassStats
	_, err := a.withLock(ctx, func() error {
		pos, err := a.cache.Cursor(ctx, lockName)
		if err != nil {
			return err
		}
		startNS, after, ok := strings.Cut(pos, "|")
		started, perr := strconv.ParseInt(startNS, 10, 64)
		if !ok || perr != nil {
			started, after = time.Now().UnixNano(), ""
		}
		var (
			next string
			done bool
		)
		st, next, done, err = a.comparePage(ctx, after)
		if err != nil {
			return err
		}
		if done {
			a.passDone(time.Unix(0, started))
			return a.cache.SetCursor(ctx, lockName, "")
		}
		return a.cache.SetCursor(ctx, lockName, strconv.FormatInt(started, 10)+"|"+next)
	})
	if errors.Is(err, errIncomplete) {
		return st, nil
	}
	return st, err
}

func (a *AntiEntropy) passDone(started time.Time) {
	if a.metrics != nil {
		a.metrics.PassSeconds.Observe(time.Since(started).Seconds())
		a.metrics.LastPass.SetToCurrentTime()
	}
}

// errIncomplete means Redis lost everything (it does not hold the whole
// listing): the rebuild (EnsureComplete) repairs that, not this pass.
var errIncomplete = errors.New("ingest: anti-entropy: redis does not hold the whole listing")

// withLock runs fn while this worker holds the anti-entropy lock. It
// reports ran=false, without calling fn, when another worker holds it, and
// errIncomplete when Redis does not hold the whole listing.
func (a *AntiEntropy) withLock(ctx context.Context, fn func() error) (ran bool, err error) {
	complete, err := a.cache.ListingComplete(ctx)
	if err != nil {
		return false, err
	}
	if !complete {
		return false, errIncomplete
	}
	release, ok, err := a.cache.TryLock(ctx, lockName, a.token, lockTTL)
	if err != nil || !ok {
		return false, err
	}
	defer release()
	return true, fn()
}

// comparePage compares one page after the given document name; the caller
// holds the lock. It returns where the next page starts and whether the walk
// is done.
func (a *AntiEntropy) comparePage(ctx context.Context, after string) (st PassStats, next string, done bool, err error) {
	revs, err := a.store.DocRevs(ctx, after, a.cfg.Page)
	if err != nil {
		return st, after, false, err
	}
	if len(revs) == 0 {
		return st, "", true, nil
	}
	st, err = a.page(ctx, revs)
	if err != nil {
		return st, after, false, err
	}
	return st, revs[len(revs)-1].Name, len(revs) < a.cfg.Page, nil
}

// page compares one page of documents and repairs those behind.
func (a *AntiEntropy) page(ctx context.Context, revs []store.DocRev) (PassStats, error) {
	var st PassStats
	eventRev, marketRev := map[string]int64{}, map[string]int64{}
	var events, markets []string
	for _, d := range revs {
		kind, id, _ := strings.Cut(d.Name, ":")
		switch kind {
		case "e":
			events = append(events, id)
			eventRev[id] = d.Rev
		case "m":
			markets = append(markets, id)
			marketRev[id] = d.Rev
		}
	}
	have, err := a.cache.ReadRevisions(ctx, events, markets)
	if err != nil {
		return st, err
	}
	// Postgres first: ingest writes Redis after it commits, so whatever
	// Redis lacks when read after was committed before the Postgres read.
	wantTrades, err := a.store.TradeWindows(ctx, markets, cache.MaxTrades)
	if err != nil {
		return st, err
	}
	haveTrades, err := a.cache.ReadTradeWindows(ctx, markets)
	if err != nil {
		return st, err
	}
	st.Checked = len(revs) + len(wantTrades)
	behindEvents := slices.DeleteFunc(slices.Clone(events), func(id string) bool {
		return have.Events[id] >= eventRev[id] && have.Listing[id] >= eventRev[id]
	})
	behindMarkets := slices.DeleteFunc(slices.Clone(markets), func(id string) bool {
		return have.Markets[id] >= marketRev[id]
	})
	var tradeMarkets []string
	for _, id := range markets {
		w, ok := wantTrades[id]
		if !ok {
			continue
		}
		h := haveTrades[id]
		if h.N != int64(w.N) || h.Newest != cache.TradeScore(&store.Trade{TS: w.Newest}) ||
			h.Oldest != cache.TradeScore(&store.Trade{TS: w.Oldest}) {
			tradeMarkets = append(tradeMarkets, id)
		}
	}
	if a.metrics != nil {
		a.metrics.Checked.Add(float64(st.Checked))
	}
	if len(behindEvents)+len(behindMarkets)+len(tradeMarkets) == 0 {
		return st, nil
	}
	return a.repair(ctx, st, behindEvents, behindMarkets, tradeMarkets)
}

// repair reads the current documents of the ids found behind, keeps those
// Redis still holds an older revision of (ingest may have written them since
// the comparison) and the trade lists that really lost trades, writes them,
// and announces them.
func (a *AntiEntropy) repair(ctx context.Context, st PassStats, events, markets, tradeMarkets []string) (PassStats, error) {
	// The trades first: when they wait to settle, the documents' re-check
	// below comes after the wait too.
	trades, tradeMarkets, err := a.lostTrades(ctx, tradeMarkets)
	if err != nil {
		return st, err
	}
	var evDocs []store.EventDoc
	var mkDocs []store.MarketDoc
	if len(events) > 0 {
		if evDocs, err = a.store.EventDocsByID(ctx, events); err != nil {
			return st, err
		}
	}
	if len(markets) > 0 {
		if mkDocs, err = a.store.MarketDocsByID(ctx, markets); err != nil {
			return st, err
		}
	}
	now, err := a.cache.ReadRevisions(ctx, events, markets)
	if err != nil {
		return st, err
	}
	var n notice.Change
	evDocs = slices.DeleteFunc(evDocs, func(d store.EventDoc) bool {
		docBehind, listingBehind := now.Events[d.ID] < d.Rev, now.Listing[d.ID] < d.Rev
		if docBehind {
			st.Events++
		}
		if listingBehind {
			st.Listings++
		}
		if docBehind || listingBehind {
			n.Events = append(n.Events, d.ID)
		}
		return !docBehind && !listingBehind
	})
	mkDocs = slices.DeleteFunc(mkDocs, func(d store.MarketDoc) bool {
		if now.Markets[d.ID] < d.Rev {
			st.Markets++
			n.Markets = append(n.Markets, d.ID)
			return false
		}
		return true
	})
	st.TradeLists = len(tradeMarkets)
	n.Trades = tradeMarkets
	if len(evDocs)+len(mkDocs)+len(trades) == 0 {
		return st, nil
	}
	// The notice Apply returns names what was rewritten and carries the
	// price items (nodes' replicas take them from it).
	n, err = a.cache.ApplyDocs(ctx, evDocs, mkDocs, trades)
	if err != nil {
		if n.Seq > 0 {
			// It took a number and may have written in part: the notice
			// drops what it names and closes the number's gap.
			a.notify(n)
		}
		return st, fmt.Errorf("ingest: anti-entropy: rewrite: %w", err)
	}
	if a.metrics != nil {
		a.metrics.Repaired.WithLabelValues("event").Add(float64(st.Events))
		a.metrics.Repaired.WithLabelValues("listing").Add(float64(st.Listings))
		a.metrics.Repaired.WithLabelValues("market").Add(float64(st.Markets))
		a.metrics.Repaired.WithLabelValues("trades").Add(float64(st.TradeLists))
	}
	a.log.Info("anti-entropy repaired cache documents", "events", st.Events, "listings", st.Listings,
		"markets", st.Markets, "trade_lists", st.TradeLists)
	a.notify(n)
	return st, nil
}

// lostTrades narrows the markets whose trade windows differ from Postgres'
// to those whose lists in Redis lost trades, and returns their newest trades
// in Postgres to rewrite. A window also differs while ingest is between its
// commit and its Redis write, or when Redis holds trades committed after the
// window was read: neither is a loss. So a list is lost only when trades
// Postgres holds are missing from it in two looks Settle apart (ingest's
// write takes milliseconds). Rewriting adds to the list and keeps its newest
// (see cache.Apply), so a rewrite never takes out a newer trade.
func (a *AntiEntropy) lostTrades(ctx context.Context, markets []string) ([]store.Trade, []string, error) {
	if len(markets) == 0 {
		return nil, nil, nil
	}
	newest := make(map[string][]store.Trade, len(markets))
	var all []store.Trade
	for _, id := range markets {
		ts, err := a.store.NewestTrades(ctx, id, cache.MaxTrades)
		if err != nil {
			return nil, nil, err
		}
		newest[id] = ts
		all = append(all, ts...)
	}
	missing, err := a.cache.MissingTrades(ctx, all)
	if err != nil || len(missing) == 0 {
		return nil, nil, err
	}
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(a.cfg.Settle):
	}
	var again []store.Trade
	for _, ts := range missing {
		again = append(again, ts...)
	}
	still, err := a.cache.MissingTrades(ctx, again)
	if err != nil {
		return nil, nil, err
	}
	var trades []store.Trade
	var lost []string
	for _, id := range markets {
		if len(still[id]) > 0 {
			lost = append(lost, id)
			trades = append(trades, newest[id]...)
		}
	}
	return trades, lost, nil
}

func (a *AntiEntropy) notify(n notice.Change) {
	if a.nc == nil {
		return
	}
	if err := a.nc.Publish(a.cfg.NoticeSubject, n.EncodeWithin(a.nc.MaxPayload())); err != nil {
		a.log.Warn("anti-entropy change notice not published", "err", err)
	}
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

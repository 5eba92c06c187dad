package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/ratelog"
	"github.com/marketdata/marketdata/store"
)

// Reader answers the API's reads, per resource: node memory, else Redis,
// else the store (Postgres), and then a background repair of what Redis
// answered as missing. Its methods return wire-ready bytes; callers never
// know which layer answered (the metric marketdata_reads_total does).
//
// # Node memory and change notices
//
// The node keeps recent answers (price items, event documents, /events
// pages, and ids that Redis and the store both say are unknown) for at most
// TTL. Every writer of the cache (ingest batches, anti-entropy, repairs by
// any node) announces what it rewrote in a change notice; Notice drops
// those ids from memory at once. A read takes the memory's epoch before it
// goes to Redis and stores its answer only if no drop happened meanwhile
// (epochs), so an answer read before a drop never outlives it.
//
// # Monotonic reads across nodes
//
// Dropping on notices is not enough when a client polls several nodes:
// node A may read version v from Redis before node B has applied the
// notice that drops v-1 from B's memory, and the client would see v, then
// v-1. So every write takes a change number first (Cache.Apply: INCR in a
// round trip of its own, then the documents, then the notice naming the
// number), the Reader tracks applied (every number up to it has had its
// notice applied), and a request may answer from memory only when the
// current number, read from Redis after the request arrived, is at most
// applied. Why that suffices: suppose a client saw a write w (number s)
// before sending this request. w's INCR happened before w's write, which
// happened before the client saw it, which was before this request arrived,
// before the number was read: so the number read is at least s. If it is at
// most applied, w's notice was applied here before the check, and its drop
// came before that (Notice drops, then records the number). An answer in
// memory now was either stored after the drop — by a read whose epoch was
// taken after the drop (a store checks the epoch), so it read Redis after w
// was written, and shows w or newer — or it is not there: the drop removed
// it. (Answers looked up before the check are looked up again when the
// epoch moved since.) Otherwise notices are in flight: the request reads
// Redis and stores nothing.
//
// A number whose notice never comes (the writer died between write and
// notice, NATS dropped it) would stop memory from answering for good: a gap
// open longer than NoticeWait drops all of node memory and is closed,
// counted in marketdata_read_notices_lost_total. A Redis that lost its data
// restarts the counter at its clock (seq.go), far above what the node
// applied, which it handles the same way; a counter set far below applied
// also drops all and starts over from it. What this does not cover: a
// write that completes after its number was given up for lost and whose
// notice is lost too (TTL bounds that), writes a Redis Cluster failover
// loses (anti-entropy rewrites them, with a number), and Rebuild, which
// takes no number: it rewrites what the store holds and ends with a flush
// notice, which drops everything.
//
// When Redis does not answer, memory serves what it holds (within TTL) and
// the store answers the rest: degraded, as the node was before.
type Reader struct {
	cache   *Cache
	store   Store
	rules   Rules
	cfg     ReaderConfig
	log     *slog.Logger
	publish func(notice.Change) error

	g   epochs
	rep *replica
	// repWake asks the replica's loader for a load; stop ends the Reader's
	// own goroutines.
	repWake chan struct{}
	stop    chan struct{}
	// lastRedis is when a change-number poll last reached Redis (unix ns).
	lastRedis atomic.Int64
	// feedDown: the node is cut from the change notices (NATS
	// disconnected); the replica waits for FeedUp before it loads again.
	feedDown  atomic.Bool
	fallbacks chan struct{}
	prices    *memory[string, PriceItem]
	events    *memory[string, EventItem]
	pages     *memory[pageKey, Page]
	trips     *trips
	seqs      *appliedSeqs
	// stopClock stops node memory's clock (nil: a test's clock).
	stopClock func()

	closeOnce sync.Once

	subsMu sync.RWMutex
	subs   []func(notice.Change)

	// repairs bounds the background repairs in flight.
	repairs              chan struct{}
	repairWarn, lostWarn ratelog.Limiter

	reads   *prometheus.CounterVec
	readsAt [numResources][numLayers]prometheus.Counter
	lost    prometheus.Counter
	// replicaLoads and orderWaits count whole loads of the replica and
	// reads that could not wait for it to reach a client's position.
	replicaLoads, orderWaits prometheus.Counter
	collectors               []prometheus.Collector
}

// Store is what the Reader reads when Redis lacks a document (evicted,
// flushed, not yet rebuilt) or does not answer: Postgres, or its read
// replica (store.ReplicaReads).
type Store interface {
	EventDocsByID(ctx context.Context, ids []string) ([]store.EventDoc, error)
	MarketDocsByID(ctx context.Context, ids []string) ([]store.MarketDoc, error)
	NewestTrades(ctx context.Context, marketID string, limit int) ([]store.Trade, error)
	ListedEvents(ctx context.Context, f store.ListFilter, after string, limit int) ([]store.Event, error)
}

var (
	_ Store = (*store.Store)(nil)
	_ Store = (*store.ReplicaReads)(nil)
)

// ReaderConfig sizes a Reader. cmd/marketdata sets every field; NewReader
// refuses a value it cannot use.
type ReaderConfig struct {
	// TTL bounds how long node memory answers without a change notice
	// (2s): the safety net under the notices, not the mechanism.
	TTL time.Duration
	// PriceBytes, EventBytes and PageBytes bound node memory per resource,
	// in bytes of keys and bodies.
	PriceBytes, EventBytes, PageBytes int
	// NoticeWait is how long a gap in the change numbers may stay open
	// before its notices count as lost (500ms).
	NoticeWait time.Duration
	// NoticeGrace is how long a read that found writes in flight waits for
	// their notices before it reads from Redis what memory holds (5ms);
	// 0: it does not wait.
	NoticeGrace time.Duration
	// RedisTimeout bounds a request's wait for Redis (1s): a slow Redis is
	// waited for, not taken for a down one; past it the request reads the
	// store, if a fallback slot is free (Fallbacks), else answers
	// ErrUnavailable. The limiter has a budget of its own.
	RedisTimeout time.Duration
	// Fallbacks bounds the store reads in flight that stand in for Redis
	// (8): an overloaded Redis must not turn into a stampede on Postgres.
	Fallbacks int
	// Replica keeps every price item in node memory (replica.go), updated
	// in place by the change notices; snapshot reads and streams are
	// answered from it with no round trip.
	Replica bool
	// OrderWait bounds how long a read that must show a position at least
	// (a client's ETag) waits for the replica to reach it (100ms); then it
	// reads Redis, which is never behind what any node showed.
	OrderWait time.Duration
	// PollEvery is how often the node reads Redis's change number in the
	// background (100ms): how a lost notice, and a Redis that stopped
	// answering, are noticed when no request asks.
	PollEvery time.Duration
	// Repairs bounds the background repairs in flight.
	Repairs int
	// FilterScan bounds how many listed events one read of a page with a
	// match filter (min_confidence, relation) examines in Redis (1000):
	// the work of one request, whatever share of events the filter keeps.
	FilterScan int
}

// DefaultReaderConfig is the one home of the Reader's defaults: a 2 s TTL
// (the bound docs/api.md gives without a notice), 8 + 32 + 32 MB of node
// memory (price items: only what the replica does not answer), a 500 ms
// notice gap, a 5 ms notice grace, 16 repairs, a 1 s wait for Redis with
// 8 store fallbacks at once, the price replica on, a 100 ms order wait, a
// 100 ms change-number poll and 1000 events examined per filtered page.
func DefaultReaderConfig() ReaderConfig {
	return ReaderConfig{
		TTL: 2 * time.Second, PriceBytes: 8 << 20, EventBytes: 32 << 20, PageBytes: 32 << 20,
		NoticeWait: 500 * time.Millisecond, NoticeGrace: 5 * time.Millisecond, RedisTimeout: time.Second,
		Fallbacks: 8, Repairs: 16, Replica: true, OrderWait: 100 * time.Millisecond, PollEvery: 100 * time.Millisecond,
		FilterScan: 1000,
	}
}

// ReaderDeps are a Reader's collaborators.
type ReaderDeps struct {
	// Log gets the repair and lost-notice warnings; nil discards them.
	Log *slog.Logger
	// Publish sends a repair's change notice to every node (with its
	// change number). Nil: repairs are not announced, and every node counts
	// their numbers as lost notices.
	Publish func(notice.Change) error
	// Now is the clock of the notice gaps; nil is time.Now.
	Now func() time.Time
	// memoryClock is node memory's clock (tests move it); nil is real time.
	memoryClock otter.Clock
}

// Errors the Reader's methods return for callers to branch on.
var (
	// ErrUnavailable: neither Redis nor the store could answer; it wraps
	// both causes.
	ErrUnavailable = errors.New("cache: the data cannot be read right now")
	// ErrNotFound: neither Redis nor the store knows the id.
	ErrNotFound = errors.New("cache: unknown id")
	// ErrNotServed: the id is known but not in the served set.
	ErrNotServed = errors.New("cache: not served")
)

// NewReader returns a Reader over c (Redis) and st (the store).
func NewReader(c *Cache, st Store, cfg ReaderConfig, d ReaderDeps) (*Reader, error) {
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"TTL", cfg.TTL <= 0}, {"PriceBytes", cfg.PriceBytes <= 0}, {"EventBytes", cfg.EventBytes <= 0},
		{"PageBytes", cfg.PageBytes <= 0}, {"NoticeWait", cfg.NoticeWait <= 0},
		{"RedisTimeout", cfg.RedisTimeout <= 0}, {"Repairs", cfg.Repairs <= 0},
		{"Fallbacks", cfg.Fallbacks <= 0}, {"OrderWait", cfg.OrderWait <= 0}, {"PollEvery", cfg.PollEvery <= 0},
		{"FilterScan", cfg.FilterScan <= 0},
	} {
		if f.bad {
			return nil, fmt.Errorf("cache: reader config: %s must be positive", f.name)
		}
	}
	if cfg.NoticeGrace < 0 {
		return nil, errors.New("cache: reader config: NoticeGrace must not be negative")
	}
	if c == nil || st == nil {
		return nil, errors.New("cache: a reader needs a cache and a store")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	r := &Reader{
		cache: c, rules: c.Rules(), cfg: cfg, log: d.Log, publish: d.Publish,
		trips:     newTrips(c, cfg.RedisTimeout),
		repairs:   make(chan struct{}, cfg.Repairs),
		fallbacks: make(chan struct{}, cfg.Fallbacks),
		repWake:   make(chan struct{}, 1),
		stop:      make(chan struct{}),
	}
	r.store = &boundedStore{st: st, slots: r.fallbacks}
	if d.memoryClock == nil {
		// Memory checks its TTL on every read; the precise clock was a
		// tenth of a 50-id snapshot's CPU. 10 ms of slack on a 2 s safety
		// net is nothing.
		coarse := otter.NewCoarseClock(10 * time.Millisecond)
		r.stopClock = coarse.Stop
		d.memoryClock = coarse
	}
	r.prices = newMemory(&r.g, memoryConfig[string, PriceItem]{
		maxBytes: cfg.PriceBytes, ttl: cfg.TTL, clock: d.memoryClock,
		weigh: func(id string, it PriceItem) uint32 { return uint32(entryOverhead + len(id) + len(it.Body)) },
	})
	r.events = newMemory(&r.g, memoryConfig[string, EventItem]{
		maxBytes: cfg.EventBytes, ttl: cfg.TTL, clock: d.memoryClock,
		weigh: func(id string, it EventItem) uint32 {
			return uint32(entryOverhead + len(id) + len(it.Body) + len(it.MergedInto))
		},
	})
	r.pages = newMemory(&r.g, memoryConfig[pageKey, Page]{
		maxBytes: cfg.PageBytes, ttl: cfg.TTL, clock: d.memoryClock, weigh: pageWeight,
	})
	r.seqs = newAppliedSeqs(cfg.NoticeWait, d.Now, r.flushMemory, r.onJump)
	if cfg.Replica {
		r.rep = newReplica()
		r.seqs.onLost = r.replicaLost
	}
	r.metrics()
	// Learn Redis's change number now, and then every PollEvery: the node
	// trusts its memory only NoticeWait after it first saw one (the notices
	// of writes in flight when it started may still come), and that wait
	// may as well run while the node loads.
	go r.pollLoop()
	if r.rep != nil {
		go r.replicaLoop()
		r.wakeReplica()
	}
	return r, nil
}

// entryOverhead is what an entry costs besides its key and body (otter's
// node, the value's headers), in the weights that bound memory.
const entryOverhead = 96

// Close stops the Reader's background work (memory clean-up, round-trip
// senders). Reads after Close time out on Redis.
func (r *Reader) Close() {
	r.closeOnce.Do(func() { close(r.stop) })
	r.trips.close()
	r.prices.close()
	r.events.close()
	r.pages.close()
	if r.stopClock != nil {
		r.stopClock()
	}
}

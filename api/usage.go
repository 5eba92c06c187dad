package api

// Usage counting (contract §3 "Usage"; docs/api.md "Usage"). Every request
// that passed the account's window is counted in the node's memory by
// (account, UTC day, route); a flusher adds the counts to Postgres every
// Config.UsageFlush (500 ms) in one batch, so no request pays a write, a
// Redis flush loses nothing, and a node killed outright loses at most the
// counts of its last interval.

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/internal/ratelog"
	"github.com/marketdata/marketdata/store"
)

// UsageStore keeps the usage counts (store.Store): AddUsage adds a batch
// once per flush id, Usage lists an account's rows, SweepUsage deletes
// what is past retention. It is the primary: /account/usage reads what
// the nodes have flushed, fresh.
type UsageStore interface {
	AddUsage(ctx context.Context, flushID string, counts []store.UsageCount) (applied bool, err error)
	Usage(ctx context.Context, q store.UsageQuery) ([]store.UsageCount, error)
	SweepUsage(ctx context.Context, now time.Time) (int64, error)
}

var _ UsageStore = (*store.Store)(nil)

// Route names usage is counted under (contract §3), by index.
var usageRouteNames = [...]string{
	"key", "events", "event", "search", "snapshot", "trades", "account_keys", "account_usage", "stream",
}

// usageRoutes maps a Fiber route path to its index in usageRouteNames. A
// path not here (the catch-all 404 of unknown routes) is not counted: it
// names no route of the contract.
var usageRoutes = map[string]uint8{
	"/public/v1/key":                          0,
	"/public/v1/events":                       1,
	"/public/v1/events/:universal_id":         2,
	"/public/v1/markets/search":               3,
	"/public/v1/prices/snapshot":              4,
	"/public/v1/markets/:universal_id/trades": 5,
	"/public/v1/account/keys":                 6,
	"/public/v1/account/usage":                7,
	"/public/v1/stream":                       8,
}

// usageRouteIndex is the index of a contract route name, or -1.
func usageRouteIndex(name string) int {
	for i, n := range usageRouteNames {
		if n == name {
			return i
		}
	}
	return -1
}

// usageKey is what a count is kept by; day is days since 1970-01-01 UTC.
type usageKey struct {
	account string
	day     int32
	route   uint8
}

// usageShards spreads the counting over locks: a request picks a shard at
// random (math/rand/v2's per-thread generator, no shared state), so even
// one busy account on one route does not make every core wait on one
// lock. The flush adds the shards up.
const usageShards = 16

type usageShard struct {
	mu sync.Mutex
	m  map[usageKey]int64
	_  [40]byte // a cache line of its own
}

// usageCounter holds the counts not yet taken by a flush.
type usageCounter struct {
	shards [usageShards]usageShard
}

func newUsageCounter() *usageCounter {
	u := &usageCounter{}
	for i := range u.shards {
		u.shards[i].m = make(map[usageKey]int64)
	}
	return u
}

// add counts one request: a map lookup and an add under an uncontended lock.
func (u *usageCounter) add(account string, day int32, route uint8) {
	sh := &u.shards[rand.Uint32()%usageShards]
	k := usageKey{account: account, day: day, route: route}
	sh.mu.Lock()
	sh.m[k]++
	sh.mu.Unlock()
}

// take removes and returns every count, merged across shards.
func (u *usageCounter) take() map[usageKey]int64 {
	var out map[usageKey]int64
	for i := range u.shards {
		sh := &u.shards[i]
		sh.mu.Lock()
		m := sh.m
		if len(m) > 0 {
			sh.m = make(map[usageKey]int64, len(m))
		}
		sh.mu.Unlock()
		if len(m) == 0 {
			continue
		}
		if out == nil {
			out = m
			continue
		}
		for k, n := range m {
			out[k] += n
		}
	}
	return out
}

// utcDay is the number of the UTC day t falls on.
func utcDay(t time.Time) int32 {
	s := t.Unix()
	d := s / 86400
	if s%86400 < 0 {
		d--
	}
	return int32(d)
}

// dayTime is the midnight (UTC) starting day d.
func dayTime(d int32) time.Time {
	return time.Unix(int64(d)*86400, 0).UTC()
}

// countUsage counts the request on its route, on the UTC day of now; a
// route outside the contract's list is not counted.
func (s *Server) countUsage(c *fiber.Ctx, account string) {
	if s.usage == nil {
		return
	}
	r := c.Route()
	if r == nil {
		return
	}
	idx, ok := usageRoutes[r.Path]
	if !ok {
		return
	}
	s.usage.counter.add(account, utcDay(s.now()), idx)
}

// usageFlusher adds the node's counts to the store. One batch is in flight
// at a time: a batch that failed is retried as it was (same id, so a
// commit the node did not hear about is not added twice) before the next
// is taken, while new counts keep merging into the counter: memory holds
// at most two counts per (account, day, route), however long Postgres is
// away.
type usageFlusher struct {
	counter  *usageCounter
	store    UsageStore
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex // one flush at a time
	pending *usageBatch
	node    string // this process's prefix of batch ids
	seq     atomic.Uint64
	// swept is the last sweep's time; sweeping: one runs (in its own
	// goroutine, which alone touches swept).
	swept    time.Time
	sweeping atomic.Bool
	// warn keeps the WARN of a failing flush (one per interval while
	// Postgres is away) to one per 10 s.
	warn ratelog.Limiter
	// stop ends run; done is closed when run has returned (nil: run
	// never started).
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

type usageBatch struct {
	id     string
	counts []store.UsageCount
}

// usageSweepEvery is how often a node sweeps usage past retention.
const usageSweepEvery = time.Hour

func newUsageFlusher(st UsageStore, interval time.Duration, log *slog.Logger, now func() time.Time) *usageFlusher {
	return &usageFlusher{
		counter: newUsageCounter(), store: st, interval: interval, log: log, now: now,
		// Unique per flusher, not only per process (tests run several
		// nodes in one): a batch id shared by two flushers would make the
		// second one's counts look applied already.
		node: requestIDPrefix + "-" + strconv.FormatUint(rand.Uint64(), 36),
		stop: make(chan struct{}),
	}
}

// run flushes every interval until final is called (the last flush is
// final's). It does not stop with Start's context: while the node drains
// its requests at shutdown (up to its deadline), their counts keep going
// to Postgres every interval, so a node killed during the drain still
// loses no more than its last interval.
func (f *usageFlusher) run(context.Context) {
	defer close(f.done)
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		// Not ctx: a flush under way when the node stops finishes (or
		// fails and is retried by the final flush), it is not cut.
		fctx, cancel := context.WithTimeout(context.Background(), 5*f.interval)
		if err := f.flush(fctx); err != nil {
			f.warn.Log(fctx, f.log, slog.LevelWarn, "usage counts not written; kept and retried", "err", err)
		}
		cancel()
		f.sweepInBackground()
	}
}

// sweepInBackground sweeps (once an hour) off the flush loop: a slow delete
// must not delay the next flush, which bounds what a killed node loses.
func (f *usageFlusher) sweepInBackground() {
	if !f.sweeping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer f.sweeping.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		f.sweep(ctx)
	}()
}

// flush writes the pending batch, if any, then everything counted since.
func (f *usageFlusher) flush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending != nil {
		if _, err := f.store.AddUsage(ctx, f.pending.id, f.pending.counts); err != nil {
			return err
		}
		f.pending = nil
	}
	m := f.counter.take()
	if len(m) == 0 {
		return nil
	}
	b := &usageBatch{id: f.node + "-" + strconv.FormatUint(f.seq.Add(1), 36), counts: make([]store.UsageCount, 0, len(m))}
	for k, n := range m {
		b.counts = append(b.counts, store.UsageCount{AccountID: k.account, Day: dayTime(k.day), Route: usageRouteNames[k.route], Count: n})
	}
	f.pending = b
	if _, err := f.store.AddUsage(ctx, b.id, b.counts); err != nil {
		return err
	}
	f.pending = nil
	return nil
}

// sweep deletes usage past retention, once an hour per node (every node
// does it; the delete is idempotent and cheap on the day index).
func (f *usageFlusher) sweep(ctx context.Context) {
	now := f.now()
	if now.Sub(f.swept) < usageSweepEvery {
		return
	}
	n, err := f.store.SweepUsage(ctx, now)
	if err != nil {
		f.log.Warn("usage past retention not swept; retried next time", "err", err)
		return
	}
	f.swept = now
	if n > 0 {
		f.log.Info("usage past retention swept", "rows", n)
	}
}

// finalWait bounds the last flush, on its own clock: the shutdown's may be
// used up by the drain.
const finalWait = 3 * time.Second

// final flushes what is left when the node stops: after the run loop has
// returned, so the two never interleave their batches, and retrying until
// finalWait runs out (a connection reset at shutdown must not lose the
// last interval).
func (f *usageFlusher) final(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalWait)
	defer cancel()
	f.stopOnce.Do(func() { close(f.stop) })
	if f.done != nil {
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := f.flush(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

package usage

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketdata/marketdata/internal/ratelog"
	"github.com/marketdata/marketdata/store"
)

// Store keeps the usage counts (store.Store): AddUsage adds a batch once
// per flush id, Usage lists an account's rows, SweepUsage deletes what is
// past retention. It is the primary: the listing reads what the nodes have
// flushed, fresh.
type Store interface {
	AddUsage(ctx context.Context, flushID string, counts []store.UsageCount) (applied bool, err error)
	Usage(ctx context.Context, q store.UsageQuery) ([]store.UsageCount, error)
	SweepUsage(ctx context.Context, now time.Time) (int64, error)
}

var _ Store = (*store.Store)(nil)

// Options are what a Ledger is built with beside its Store.
type Options struct {
	// Count: the node counts its requests and flushes them (false: it
	// only lists what the store holds).
	Count bool
	// Interval is how often the counts are flushed (Config.UsageFlush).
	Interval time.Duration
	// Node is this process's prefix of batch ids (the request ids' own).
	Node string
	Log  *slog.Logger
	Now  func() time.Time
}

// Ledger is a node's view of the accounts' usage: it counts the node's
// requests and flushes them to the Store, and lists what the Store holds.
//
// One batch is in flight at a time: a batch that failed is retried as it
// was (same id, so a commit the node did not hear about is not added twice)
// before the next is taken, while new counts keep merging into the tally:
// memory holds at most two counts per (account, day, route), however long
// Postgres is away.
type Ledger struct {
	store    Store
	tally    *tally // nil: the node does not count
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex // one flush at a time
	pending *batch
	node    string // this ledger's prefix of batch ids
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

type batch struct {
	id     string
	counts []store.UsageCount
}

// sweepEvery is how often a node sweeps usage past retention.
const sweepEvery = time.Hour

// New builds a ledger over st; Start begins its flushes.
func New(st Store, o Options) *Ledger {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	l := &Ledger{
		store: st, interval: o.Interval, log: o.Log, now: o.Now,
		// Unique per ledger, not only per process (tests run several
		// nodes in one): a batch id shared by two ledgers would make the
		// second one's counts look applied already.
		node: o.Node + "-" + strconv.FormatUint(rand.Uint64(), 36),
		stop: make(chan struct{}),
	}
	if o.Count {
		l.tally = newTally()
	}
	return l
}

// Count counts one request of account on route, on the UTC day of now (a
// ledger that does not count ignores it).
func (l *Ledger) Count(account string, route Route) {
	if l.tally == nil {
		return
	}
	l.tally.add(account, utcDay(l.now()), route)
}

// List is the account's rows q asks for, from the Store.
func (l *Ledger) List(ctx context.Context, q store.UsageQuery) ([]store.UsageCount, error) {
	return l.store.Usage(ctx, q)
}

// Start flushes the counts every interval until Close, in the background
// (once; a ledger that does not count has nothing to flush). It does not
// stop with a context: while the node drains its requests at shutdown (up
// to its deadline), their counts keep going to Postgres every interval,
// so a node killed during the drain still loses no more than its last
// interval.
func (l *Ledger) Start() {
	if l.tally == nil || l.done != nil {
		return
	}
	l.done = make(chan struct{})
	go l.run()
}

func (l *Ledger) run() {
	defer close(l.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		// Not the node's context: a flush under way when the node stops
		// finishes (or fails and is retried by the final flush), it is
		// not cut.
		fctx, cancel := context.WithTimeout(context.Background(), 5*l.interval)
		if err := l.flush(fctx); err != nil {
			l.warn.Log(fctx, l.log, slog.LevelWarn, "usage counts not written; kept and retried", "err", err)
		}
		cancel()
		l.sweepInBackground()
	}
}

// sweepInBackground sweeps (once an hour) off the flush loop: a slow delete
// must not delay the next flush, which bounds what a killed node loses.
func (l *Ledger) sweepInBackground() {
	if !l.sweeping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer l.sweeping.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l.sweep(ctx)
	}()
}

// flush writes the pending batch, if any, then everything counted since.
func (l *Ledger) flush(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending != nil {
		if _, err := l.store.AddUsage(ctx, l.pending.id, l.pending.counts); err != nil {
			return err
		}
		l.pending = nil
	}
	m := l.tally.take()
	if len(m) == 0 {
		return nil
	}
	b := &batch{id: l.node + "-" + strconv.FormatUint(l.seq.Add(1), 36), counts: make([]store.UsageCount, 0, len(m))}
	for k, n := range m {
		b.counts = append(b.counts, store.UsageCount{AccountID: k.account, Day: dayTime(k.day), Route: k.route.String(), Count: n})
	}
	l.pending = b
	if _, err := l.store.AddUsage(ctx, b.id, b.counts); err != nil {
		return err
	}
	l.pending = nil
	return nil
}

// sweep deletes usage past retention, once an hour per node (every node
// does it; the delete is idempotent and cheap on the day index).
func (l *Ledger) sweep(ctx context.Context) {
	now := l.now()
	if now.Sub(l.swept) < sweepEvery {
		return
	}
	n, err := l.store.SweepUsage(ctx, now)
	if err != nil {
		l.log.Warn("usage past retention not swept; retried next time", "err", err)
		return
	}
	l.swept = now
	if n > 0 {
		l.log.Info("usage past retention swept", "rows", n)
	}
}

// finalWait bounds the last flush, on its own clock: the shutdown's may be
// used up by the drain.
const finalWait = 3 * time.Second

// Close flushes what is left when the node stops: after the flush loop has
// returned, so the two never interleave their batches, and retrying until
// finalWait runs out (a connection reset at shutdown must not lose the
// last interval). A ledger that does not count has nothing to flush.
func (l *Ledger) Close(ctx context.Context) error {
	if l.tally == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalWait)
	defer cancel()
	l.stopOnce.Do(func() { close(l.stop) })
	if l.done != nil {
		select {
		case <-l.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := l.flush(ctx)
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

package stream

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"sync"

	"github.com/fasthttp/websocket"
	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/ratelog"
)

// Prices is the read path the Hub reads price items through: the same
// reads (node memory, Redis, Postgres) that answer the snapshot route, so a
// price on subscribe is the snapshot route's item for that market.
type Prices interface {
	Prices(ctx context.Context, ids []string) ([]cache.PriceItem, error)
}

var _ Prices = (*cache.Reader)(nil)

// numShards spreads the subscription map's locks: a notice of many markets
// and subscribes on other connections rarely meet on one.
const numShards = 64

// Hub is one node's streams.
type Hub struct {
	src Prices
	cfg Config
	log *slog.Logger
	m   *metrics

	seed   maphash.Seed
	shards [numShards]shard

	connsMu sync.Mutex
	conns   map[*Conn]struct{}
	closed  bool
	drained chan struct{} // closed when closed and the last connection ends

	// fanq are the fan-out workers' queues: worker w owns the shards i
	// with i % len(fanq) == w.
	fanq []chan []item
	// changes are the markets noticed without their items: read, then
	// fanned out (the fallback).
	changes chan change
	// reads are subscribes' reads of current prices, shared (current).
	reads     chan *currentRead
	resync    chan struct{}
	readWarn  ratelog.Limiter
	closeOnce sync.Once
}

type shard struct {
	mu     sync.RWMutex
	topics map[string]*topic
}

// topic is one market's subscribers on this node.
type topic struct {
	// subs are the connections' subscriptions to it. A fan-out reads the
	// slice it found without copying or a lock: a subscribe only appends
	// (which writes past every length handed out) and an unsubscribe
	// replaces the slice, so no element a reader sees ever changes. (A copy
	// per subscribe made 50 subscribers of a market cost 10 KB of garbage.)
	subs []*sub
	// rev is the newest revision fanned out: an older or equal one read
	// later (two reads racing, a resync) is not sent again.
	rev int64
	// sum is the hash of the body fanned out last: a newer revision with
	// the same bytes (the store gives a document a new revision when a
	// batch names it, even if an update in it was ignored as old, and
	// when ingest retries a batch) is no change, and is not sent.
	sum uint64
	// body is revision rev's item. A connection that subscribes later
	// takes it as its snapshot when its own read is older (Redis lost the
	// write with a failed master, or the read raced the fan-out): else it
	// would wait for the market's next change or resync.
	body []byte
}

// change is a notice's subscribed markets and when it arrived.
type change struct {
	ids []string
	at  int64 // unix ns
}

// item is one market's price item carried by a notice, for its fan-out
// worker.
type item struct {
	id  string
	rev int64
	// body is nil when the item is not shown (the market left the served
	// set, or has no price yet).
	body []byte
	at   int64 // when its notice arrived (unix ns)
}

// New returns a Hub reading through src; Run starts its background work.
func New(src Prices, cfg Config, log *slog.Logger) (*Hub, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, errors.New("stream: a hub needs a price source")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{
		src: src, cfg: cfg, log: log, m: newMetrics(), seed: maphash.MakeSeed(),
		conns: map[*Conn]struct{}{}, drained: make(chan struct{}),
		changes: make(chan change, 4096), resync: make(chan struct{}, 1),
		reads: make(chan *currentRead, 1024), fanq: make([]chan []item, cfg.Workers),
	}
	for w := range h.fanq {
		h.fanq[w] = make(chan []item, cfg.Queue)
	}
	for i := range h.shards {
		h.shards[i].topics = map[string]*topic{}
	}
	return h, nil
}

func (h *Hub) shardOf(id string) int {
	return int(maphash.String(h.seed, id) % numShards)
}

func (h *Hub) shard(id string) *shard {
	return &h.shards[h.shardOf(id)]
}

// subscribedHere reports whether some connection here subscribes to id.
func (s *shard) subscribedHere(id string) bool {
	s.mu.RLock()
	_, ok := s.topics[id]
	s.mu.RUnlock()
	return ok
}

// Run fans changes out, resyncs every Resync, pings and watches for
// stalled writers until ctx is done.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, q := range h.fanq {
		wg.Go(func() { h.fanOutWorker(ctx, q) })
	}
	for range h.cfg.Workers {
		wg.Go(func() { h.readLoop(ctx) })
	}
	for range h.cfg.Workers {
		wg.Go(func() { h.currentLoop(ctx) })
	}
	wg.Go(func() { h.resyncLoop(ctx) })
	wg.Go(func() { h.sweepLoop(ctx) })
	wg.Wait()
}

// connList appends every open connection to dst.
func (h *Hub) connList(dst []*Conn) []*Conn {
	h.connsMu.Lock()
	defer h.connsMu.Unlock()
	for c := range h.conns {
		dst = append(dst, c)
	}
	return dst
}

// Each calls fn for every open connection (the api package closes those
// whose key changed).
func (h *Hub) Each(fn func(*Conn)) {
	for _, c := range h.connList(nil) {
		fn(c)
	}
}

// Open counts the node's open connections.
func (h *Hub) Open() int {
	h.connsMu.Lock()
	defer h.connsMu.Unlock()
	return len(h.conns)
}

// ErrShutdown is Add's answer once Shutdown began.
var ErrShutdown = errors.New("stream: the node is shutting down")

// Add takes a connection just upgraded; Serve runs it. onEnd runs once
// when it ends (the api package gives the account's stream slot back).
func (h *Hub) Add(ws *websocket.Conn, info Info, onEnd func()) (*Conn, error) {
	c := newConn(h, ws, info, onEnd)
	h.connsMu.Lock()
	defer h.connsMu.Unlock()
	if h.closed {
		return nil, ErrShutdown
	}
	h.conns[c] = struct{}{}
	h.m.open.Inc()
	return c, nil
}

// remove forgets an ended connection and its subscriptions.
func (h *Hub) remove(c *Conn, subs []*sub) {
	h.unsubscribe(subs)
	h.connsMu.Lock()
	defer h.connsMu.Unlock()
	if _, ok := h.conns[c]; !ok {
		return
	}
	delete(h.conns, c)
	h.m.open.Dec()
	if h.closed && len(h.conns) == 0 {
		h.closeOnce.Do(func() { close(h.drained) })
	}
}

// subscribe adds subs to their markets' topics.
func (h *Hub) subscribe(subs []*sub) {
	for _, st := range subs {
		s := h.shard(st.id)
		s.mu.Lock()
		t := s.topics[st.id]
		if t == nil {
			t = &topic{}
			s.topics[st.id] = t
		}
		t.subs = append(t.subs, st)
		s.mu.Unlock()
	}
}

// unsubscribe removes subs from their topics; a topic left empty goes.
func (h *Hub) unsubscribe(subs []*sub) {
	for _, st := range subs {
		s := h.shard(st.id)
		s.mu.Lock()
		if t := s.topics[st.id]; t != nil {
			next := make([]*sub, 0, len(t.subs))
			for _, o := range t.subs {
				if o != st {
					next = append(next, o)
				}
			}
			if len(next) == 0 {
				delete(s.topics, st.id)
			} else {
				t.subs = next
			}
		}
		s.mu.Unlock()
	}
}

// Shutdown closes every connection with 1001 and waits until they ended
// or ctx is done; then it cuts those left. No connection is added after.
func (h *Hub) Shutdown(ctx context.Context) error {
	h.connsMu.Lock()
	h.closed = true
	if len(h.conns) == 0 {
		h.closeOnce.Do(func() { close(h.drained) })
	}
	h.connsMu.Unlock()
	h.Each(func(c *Conn) { c.Close(CloseGoingAway, "the server is shutting down") })
	select {
	case <-h.drained:
		return nil
	case <-ctx.Done():
		h.Each(func(c *Conn) { c.cut() })
		return ctx.Err()
	}
}

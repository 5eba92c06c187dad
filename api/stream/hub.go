package stream

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/ratelog"
)

// Prices is the read path the Hub reads price items through: the same
// reads (node memory, Redis, Postgres) that answer the snapshot route, so a
// price on subscribe is the snapshot route's item for that market.
type Prices interface {
	Prices(ctx context.Context, ids []string) ([]cache.PriceItem, error)
}

var _ Prices = (*cache.Reader)(nil)

// Config sizes a Hub. DefaultConfig has the contract's values; New refuses
// a zero.
type Config struct {
	// PingEvery is how often a connection is pinged (15s).
	PingEvery time.Duration
	// PongWait closes a connection that answered no ping for this long (45s).
	PongWait time.Duration
	// StallAfter closes (4008) a connection whose client took nothing for
	// this long while a message waited (30s).
	StallAfter time.Duration
	// StallGrace is how long a stalled connection's last write may still
	// complete, so that a client that reads again gets the 4008 close frame
	// after whole messages; then the connection is cut (500ms: with the
	// sweep's 250 ms, within the contract's 1 s of the cause).
	StallGrace time.Duration
	// CloseWait bounds a close: the close frame is written within it, and
	// the connection is cut when the client has not answered it by then
	// (500ms: the contract's 1 s for every close code has room).
	CloseWait time.Duration
	// Resync is how often every market subscribed on the node is read
	// again, the safety net under lost change notices (2s, the read path's
	// bound on node memory).
	Resync time.Duration
	// ReadTimeout bounds one fan-out read.
	ReadTimeout time.Duration
	// Workers are the fan-out workers (2): each owns the markets of some
	// of the hub's shards, so a market's versions are fanned out by one
	// goroutine, in the order their notices came. As many goroutines read
	// the markets noticed without their items, and as many read current
	// prices for subscribes.
	Workers int
	// Queue is how many notices' worth of items wait for one fan-out
	// worker (1024); a worker whose queue is full drops the items and the
	// hub resyncs.
	Queue int
}

// DefaultConfig is the one home of the streams' defaults (contract §3).
func DefaultConfig() Config {
	return Config{
		PingEvery: 15 * time.Second, PongWait: 45 * time.Second,
		StallAfter: 30 * time.Second, StallGrace: 500 * time.Millisecond, CloseWait: 500 * time.Millisecond,
		Resync: 2 * time.Second, ReadTimeout: 2 * time.Second, Workers: 2, Queue: 1024,
	}
}

func (c Config) check() error {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"PingEvery", c.PingEvery}, {"PongWait", c.PongWait}, {"StallAfter", c.StallAfter},
		{"StallGrace", c.StallGrace}, {"CloseWait", c.CloseWait}, {"Resync", c.Resync}, {"ReadTimeout", c.ReadTimeout},
	} {
		if f.v <= 0 {
			return fmt.Errorf("stream: Config.%s is %s, want a positive duration", f.name, f.v)
		}
	}
	if c.PongWait <= c.PingEvery {
		return fmt.Errorf("stream: Config.PongWait (%s) must be longer than PingEvery (%s)", c.PongWait, c.PingEvery)
	}
	if c.Workers < 1 {
		return fmt.Errorf("stream: Config.Workers is %d, want at least 1", c.Workers)
	}
	if c.Queue < 1 {
		return fmt.Errorf("stream: Config.Queue is %d, want at least 1", c.Queue)
	}
	return nil
}

// Close codes (contract §3).
const (
	CloseGoingAway     = websocket.CloseGoingAway // 1001: the node shuts down
	CloseRevoked       = 4401                     // the key was revoked or expired
	CloseAccessRemoved = 4403                     // the account's access was withdrawn
	CloseStalled       = 4008                     // the client took nothing for StallAfter
)

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
	// gen is the newest revision fanned out: an older or equal one read
	// later (two reads racing, a resync) is not sent again.
	gen int64
	// sum is the hash of the body fanned out last: a newer revision with
	// the same bytes (the store gives a document a new revision when a
	// batch names it, even if an update in it was ignored as old, and
	// when ingest retries a batch) is no change, and is not sent.
	sum uint64
	// body is revision gen's item. A connection that subscribes later
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
	gen int64
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

// OnChange takes a change notice (cache.Reader.OnChange). It never blocks
// and never reads: the items the notice carries of markets some connection
// here subscribes to go to their fan-out workers, which hand the same bytes
// to every subscriber; only a market the notice names without its item is
// read (the fallback). A flush, or a queue that is full (items dropped),
// makes every subscribed market be read again (resync).
func (h *Hub) OnChange(n notice.Change) {
	if n.Flush {
		h.requestResync()
		return
	}
	at := time.Now().UnixNano()
	var carried map[string]struct{}
	if len(n.Prices) > 0 && len(n.Markets) > 0 {
		carried = make(map[string]struct{}, len(n.Prices))
	}
	var byWorker [][]item
	for _, p := range n.Prices {
		if !wireObject(p.Body) && p.Body != nil {
			continue // not an item the writer can frame: read it instead
		}
		if carried != nil {
			carried[p.ID] = struct{}{}
		}
		si := h.shardOf(p.ID)
		if !h.shards[si].subscribedHere(p.ID) {
			continue
		}
		it := item{id: p.ID, gen: p.Gen, at: at}
		if p.Served {
			it.body = p.Body
		}
		if byWorker == nil {
			byWorker = make([][]item, len(h.fanq))
		}
		w := si % len(h.fanq)
		byWorker[w] = append(byWorker[w], it)
	}
	for w, items := range byWorker {
		if len(items) == 0 {
			continue
		}
		h.m.carried.Add(float64(len(items)))
		select {
		case h.fanq[w] <- items:
		default:
			h.m.dropped.Inc()
			h.requestResync()
		}
	}
	var ids []string
	for _, id := range n.Markets {
		if _, ok := carried[id]; ok {
			continue
		}
		if h.shard(id).subscribedHere(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	select {
	case h.changes <- change{ids: ids, at: at}:
	default:
		h.m.dropped.Inc()
		h.requestResync()
	}
}

// wireObject reports whether body can be a price message's fields: a JSON
// object, which the writer opens with type and seq (appendMessage).
func wireObject(body []byte) bool {
	return len(body) >= 2 && body[0] == '{'
}

func (h *Hub) requestResync() {
	select {
	case h.resync <- struct{}{}:
	default:
	}
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

// fanOutWorker fans out the items of its markets in the order their
// notices came: no read, the notice's bytes to every subscriber. It hands
// out every notice waiting in its queue before it writes (flusher.flush):
// under load the backlog is then each connection's newest version of each
// market (conflated), written together, not old notices written in turn.
func (h *Hub) fanOutWorker(ctx context.Context, q chan []item) {
	var f flusher
	for {
		var items []item
		select {
		case <-ctx.Done():
			return
		case items = <-q:
		}
		h.handOut(items, &f)
		for n := len(q); n > 0; n-- {
			h.handOut(<-q, &f)
		}
		f.flush()
	}
}

// handOut gives a notice's items of a worker's markets to their
// subscribers; f collects the connections to write.
func (h *Hub) handOut(items []item, f *flusher) {
	for _, it := range items {
		if it.body == nil {
			// Left the served set (or no price yet): a later subscribe
			// must not take the topic's old item.
			h.forgetItem(it.id, it.gen)
			continue
		}
		h.fanOut(it.id, it.gen, it.body, maphash.Bytes(h.seed, it.body), it.at, f)
	}
}

// maxRead is how many markets one fallback read asks for.
const maxRead = 500

// readLoop reads the markets noticed without their items and fans them
// out: a newer version than the workers handed out wins either way
// (fanOut keeps a market's revisions increasing).
func (h *Hub) readLoop(ctx context.Context) {
	ids := make([]string, 0, maxRead)
	at := map[string]int64{}
	for {
		var c change
		select {
		case <-ctx.Done():
			return
		case c = <-h.changes:
		}
		ids = ids[:0]
		clear(at)
		add := func(c change) {
			for _, id := range c.ids {
				if _, ok := at[id]; !ok {
					at[id] = c.at
					ids = append(ids, id)
				}
			}
		}
		add(c)
		// Take what else waits, up to one read's worth: under load one
		// read serves many notices.
	more:
		for len(ids) < maxRead {
			select {
			case c = <-h.changes:
				add(c)
			default:
				break more
			}
		}
		h.readAndFanOut(ctx, ids, at)
	}
}

// readAndFanOut reads ids' price items and hands each newer one to its
// subscribers; at holds when each id's notice arrived (nil: a resync).
func (h *Hub) readAndFanOut(ctx context.Context, ids []string, at map[string]int64) {
	var f flusher
	for len(ids) > 0 {
		n := min(len(ids), maxRead)
		chunk := ids[:n]
		ids = ids[n:]
		rctx, cancel := context.WithTimeout(ctx, h.cfg.ReadTimeout)
		items, err := h.src.Prices(rctx, chunk)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.m.readFailures.Inc()
			h.readWarn.Log(ctx, h.log, slog.LevelWarn, "stream prices could not be read: the next resync retries", "err", err)
			h.requestResync()
			continue
		}
		h.m.read.Add(float64(len(chunk)))
		for i, it := range items {
			if !it.Shown() {
				// Left the served set (or no price yet): a later
				// subscribe must not take the topic's old item.
				h.forgetItem(chunk[i], it.Gen)
				continue
			}
			h.fanOut(chunk[i], it.Gen, it.Body, maphash.Bytes(h.seed, it.Body), at[chunk[i]], &f)
		}
		f.flush()
	}
}

// fanOut hands a market's item to its subscribers when it is newer than
// what the hub handed them last. (A subscriber whose own read on subscribe
// was older than that takes the topic's item instead: Conn.subscribe.)
func (h *Hub) fanOut(id string, gen int64, body []byte, sum uint64, at int64, f *flusher) {
	s := h.shard(id)
	s.mu.Lock()
	t := s.topics[id]
	if t == nil || gen <= t.gen {
		s.mu.Unlock()
		return
	}
	same := sum == t.sum
	t.gen, t.sum, t.body = gen, sum, body
	subs := t.subs
	s.mu.Unlock()
	if same {
		return
	}
	for _, st := range subs {
		st.deliver(gen, body, sum, at, f)
	}
}

// minResyncGap spaces resyncs that were asked for (a flush, a failed read,
// a full queue): while reads fail fast (Redis and Postgres both refusing),
// a resync per failure would spin.
const minResyncGap = 250 * time.Millisecond

// pendingCurrent is a read of current prices begun (beginCurrent): what the topics answered, and the
// shared read of the rest under way.
type pendingCurrent struct {
	h      *Hub
	ids    []string
	items  []cache.PriceItem
	at     []int // indexes of ids the read answers
	r      *currentRead
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// beginCurrent begins reading the current price of each of ids for a
// subscribe (whose subscriptions are in the hub already); await and wait
// finish it. A market the hub has fanned out is answered from the topic
// without a read: the topic holds the newest revision fanned out, and
// whatever is newer reaches the new subscription through the fan-out like
// every other (a notice in flight, or the resync after a lost one). The
// others go to the shared reads (currentLoop), and a read older than the
// topic's item (Redis lost the write with a failed master, or the read
// raced the fan-out) gives way to it. A subscribe begins on the goroutine
// that read its command and waits on the connection's own, whose stack
// stays small (Conn.Serve). Subscribes that arrive together share one
// read: 5,000 clients reconnecting at once, each subscribing to 20 markets
// of the same 2,000, cost 2,000 items read in batches of 500, not 100,000
// (and not a Redis budget missed and a Postgres query per subscribe).
func (h *Hub) beginCurrent(ctx context.Context, ids []string) *pendingCurrent {
	p := &pendingCurrent{h: h, ids: ids, items: make([]cache.PriceItem, len(ids))}
	var read []string
	for i, id := range ids {
		if gen, body := h.newest(id); body != nil {
			p.items[i] = cache.PriceItem{Found: true, Served: true, Body: body, Gen: gen}
		} else {
			read, p.at = append(read, id), append(p.at, i)
		}
	}
	if len(read) == 0 {
		return p
	}
	p.ctx, p.cancel = context.WithTimeout(ctx, h.cfg.ReadTimeout)
	r := &currentRead{ids: read, done: make(chan struct{})}
	select {
	case h.reads <- r:
		p.r = r
	case <-p.ctx.Done():
		p.err = p.ctx.Err()
	}
	return p
}

// await returns once the read is done, its time is up or quit is closed
// (the connection closes): wait then does not block.
func (p *pendingCurrent) await(quit <-chan struct{}) {
	if p.r == nil {
		return
	}
	select {
	case <-p.r.done:
	case <-p.ctx.Done():
	case <-quit:
		p.cancel() // wait gives up
	}
}

// wait completes a read begun (beginCurrent).
func (p *pendingCurrent) wait() ([]cache.PriceItem, error) {
	if p.cancel != nil {
		defer p.cancel()
	}
	if p.err != nil {
		return nil, p.err
	}
	if p.r == nil {
		return p.items, nil
	}
	select {
	case <-p.r.done:
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
	if p.r.err != nil {
		return nil, p.r.err
	}
	for j, i := range p.at {
		p.items[i] = p.r.items[j]
		if gen, body := p.h.newest(p.ids[i]); gen > p.r.items[j].Gen {
			p.items[i].Gen, p.items[i].Body = gen, body
		}
	}
	return p.items, nil
}

// forgetItem drops the item a topic holds when revision gen, newer, is not
// shown.
func (h *Hub) forgetItem(id string, gen int64) {
	s := h.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.topics[id]; t != nil && gen > t.gen {
		t.gen, t.sum, t.body = gen, 0, nil
	}
}

// newest returns the newest revision of id fanned out here and its item
// (0, nil: none).
func (h *Hub) newest(id string) (int64, []byte) {
	s := h.shard(id)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if t := s.topics[id]; t != nil {
		return t.gen, t.body
	}
	return 0, nil
}

func (h *Hub) resyncLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.resync:
		}
		ids := h.subscribed()
		h.m.resyncs.Inc()
		h.readAndFanOut(ctx, ids, nil)
		// A request made while this one ran (its own failures included)
		// waits for the gap.
		select {
		case <-ctx.Done():
			return
		case <-time.After(minResyncGap):
		}
	}
}

// currentRead is one subscribe's read of its markets' current prices.
type currentRead struct {
	ids   []string
	items []cache.PriceItem
	err   error
	done  chan struct{}
}

// maxShared bounds the ids one shared read of current prices takes.
const maxShared = 10 * maxRead

func (h *Hub) currentLoop(ctx context.Context) {
	for {
		var batch []*currentRead
		select {
		case <-ctx.Done():
			return
		case r := <-h.reads:
			batch = append(batch, r)
		}
		n := len(batch[0].ids)
	more:
		for n < maxShared {
			select {
			case r := <-h.reads:
				batch = append(batch, r)
				n += len(r.ids)
			default:
				break more
			}
		}
		h.readShared(ctx, batch)
	}
}

// readShared reads the markets of batch once each and answers every read.
func (h *Hub) readShared(ctx context.Context, batch []*currentRead) {
	seen := map[string]bool{}
	var ids []string
	for _, r := range batch {
		for _, id := range r.ids {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	got := make(map[string]cache.PriceItem, len(ids))
	var failed error
	for len(ids) > 0 && failed == nil {
		chunk := ids[:min(len(ids), maxRead)]
		ids = ids[len(chunk):]
		rctx, cancel := context.WithTimeout(ctx, h.cfg.ReadTimeout)
		items, err := h.src.Prices(rctx, chunk)
		cancel()
		if err != nil {
			failed = err
			break
		}
		for i, id := range chunk {
			got[id] = items[i]
		}
	}
	for _, r := range batch {
		if failed != nil {
			r.err = failed
		} else {
			r.items = make([]cache.PriceItem, len(r.ids))
			for i, id := range r.ids {
				r.items[i] = got[id]
			}
		}
		close(r.done)
	}
}

// subscribed lists every market some connection here subscribes to.
func (h *Hub) subscribed() []string {
	var ids []string
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.RLock()
		for id := range s.topics {
			ids = append(ids, id)
		}
		s.mu.RUnlock()
	}
	return ids
}

// sweepEvery is how often connections are checked for a due ping and a
// stalled writer: well within the contract's 1 s for 4008.
const sweepEvery = 250 * time.Millisecond

func (h *Hub) sweepLoop(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	var conns []*Conn
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		conns = h.connList(conns[:0])
		now := time.Now().UnixNano()
		for _, c := range conns {
			c.sweep(now)
		}
		clear(conns)
	}
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

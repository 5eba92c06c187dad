package cache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/metrictest"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// readerWorld is a Reader on the test's Redis prefix and database, with a
// clock for its notice gaps that the test moves, the notices its repairs
// publish, and its metrics.
type readerWorld struct {
	t     *testing.T
	c     *cache.Cache
	rdb   *redis.Client
	st    *store.Store
	r     *cache.Reader
	reg   *prometheus.Registry
	mu    sync.Mutex
	now   time.Time
	sent  chan notice.Change
	price map[string]int64 // the last price version written per market
	// seqKey is the cache's change counter.
	seqKey string
	// replica turns the price replica on; poll is the Reader's background
	// poll of the change number (an hour unless set: then only the start's
	// poll runs, and the test's clock alone moves the notice gaps).
	replica bool
	poll    time.Duration
	// scan is the Reader's FilterScan (0: the default).
	scan int
}

func (w *readerWorld) filterScan() int {
	if w.scan > 0 {
		return w.scan
	}
	return cache.DefaultReaderConfig().FilterScan
}

func (w *readerWorld) pollEvery() time.Duration {
	if w.poll > 0 {
		return w.poll
	}
	return time.Hour
}

const readerWait = 500 * time.Millisecond

func newReaderWorld(t *testing.T) *readerWorld { return newReaderWorldWith(t, false, 0) }

// newReaderWorldWith is newReaderWorld with the price replica on or off and
// the Reader's background poll every poll (0: an hour).
func newReaderWorldWith(t *testing.T, replica bool, poll time.Duration) *readerWorld {
	t.Helper()
	c, rdb, prefix := newCache(t)
	w := &readerWorld{t: t, c: c, rdb: rdb, st: newStore(t), reg: prometheus.NewRegistry(),
		now: time.Unix(1e9, 0), sent: make(chan notice.Change, 16), price: map[string]int64{}, seqKey: prefix + "{n}:seq",
		replica: replica, poll: poll}
	// A counter started an hour ago, as a deployment's is: a counter that
	// restarts (seq.go) then jumps by an hour of microseconds.
	if err := rdb.Set(context.Background(), w.seqKey, time.Now().Add(-time.Hour).UnixMicro(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	w.r = w.reader(c, w.st, w.reg)
	// An event with two markets, so that the markets are served.
	w.write(store.Batch{
		Events:  []store.Event{*activeEvent("E1", "politics", map[string]string{"a": "A1", "b": "B1"})},
		Markets: []store.Market{activeMarket("m1", "E1"), activeMarket("m2", "E1")},
	}, true)
	w.setPrice("m1", true)
	w.setPrice("m2", true)
	return w
}

// reader is a Reader over c and st with this world's clock, its metrics
// on reg.
func (w *readerWorld) reader(c *cache.Cache, st cache.Store, reg prometheus.Registerer) *cache.Reader {
	w.t.Helper()
	r, err := cache.NewReader(c, st, cache.ReaderConfig{
		TTL: time.Minute, PriceBytes: 1 << 20, EventBytes: 1 << 20, PageBytes: 1 << 20,
		NoticeWait: readerWait, RedisTimeout: time.Second, Repairs: 4, Fallbacks: 8,
		OrderWait: 100 * time.Millisecond, PollEvery: w.pollEvery(), FilterScan: w.filterScan(),
		// These tests pin the layers under the replica: memory, Redis and
		// the store (replica_test.go tests the replica).
		Replica: w.replica,
	}, cache.ReaderDeps{
		Now:     w.clock,
		Publish: func(n notice.Change) error { w.sent <- n; return nil },
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(r.Close)
	if err := r.Register(reg); err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *readerWorld) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *readerWorld) advance(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = w.now.Add(d)
}

// write commits b and writes the cache, as ingest does; with notify the
// change notice reaches the Reader.
func (w *readerWorld) write(b store.Batch, notify bool) int64 {
	w.t.Helper()
	ctx := context.Background()
	res, err := w.st.ApplyBatch(ctx, &b)
	if err != nil {
		w.t.Fatal(err)
	}
	n, err := w.c.Apply(ctx, res)
	if err != nil {
		w.t.Fatal(err)
	}
	if notify {
		w.r.Notice(n)
	}
	return n.Seq
}

// setPrice writes the next price version of market.
func (w *readerWorld) setPrice(market string, notify bool) int64 {
	w.t.Helper()
	w.price[market]++
	v := w.price[market]
	w.write(store.Batch{Prices: []store.Price{{MarketID: market, Version: v, TS: testNow.Add(time.Duration(v) * time.Second),
		Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.3), ptr(0.4), nil, 5)}}}}, notify)
	return v
}

// version is the price version a read of market shows (0: not shown).
func (w *readerWorld) version(market string) int64 {
	w.t.Helper()
	items, err := w.r.Prices(context.Background(), []string{market})
	if err != nil {
		w.t.Fatalf("Prices(%s): %v", market, err)
	}
	if !items[0].Shown() {
		return 0
	}
	return decode[struct {
		Version int64 `json:"version"`
	}](w.t, items[0].Body).Version
}

// reads is marketdata_reads_total of resource and layer.
func (w *readerWorld) reads(resource, layer string) float64 {
	w.t.Helper()
	return metrictest.Value(w.t, w.reg, "marketdata_reads_total", "resource", resource, "layer", layer)
}

// synced reads market until node memory answers it: after the start's wait
// (the Reader trusts memory only once the notices of writes in flight when
// it started had time to arrive), the first read from Redis is held.
func (w *readerWorld) synced(market string) {
	w.t.Helper()
	w.version(market)
	w.advance(readerWait)
	for range 3 {
		before := w.reads("prices", "memory")
		w.version(market)
		if w.reads("prices", "memory") > before {
			return
		}
	}
	w.t.Fatalf("%s not answered from node memory after the start's wait", market)
}

// servedFrom reads market once and says which layer answered.
func (w *readerWorld) servedFrom(market string) (int64, string) {
	w.t.Helper()
	before := map[string]float64{}
	for _, l := range []string{"memory", "redis", "store"} {
		before[l] = w.reads("prices", l)
	}
	v := w.version(market)
	for _, l := range []string{"memory", "redis", "store"} {
		if w.reads("prices", l) > before[l] {
			return v, l
		}
	}
	w.t.Fatalf("read of %s counted in no layer", market)
	return 0, ""
}

// held reads market until node memory answers it, each answer showing
// version want. (The read that dropped memory began before the drop: it
// does not store its answer, the next one does.)
func (w *readerWorld) held(market string, want int64) {
	w.t.Helper()
	for range 3 {
		v, l := w.servedFrom(market)
		if v != want {
			w.t.Fatalf("%s: version %d, want %d", market, v, want)
		}
		if l == "memory" {
			return
		}
	}
	w.t.Errorf("%s not held in node memory after 3 reads", market)
}

func (w *readerWorld) want(market string, wantV int64, wantLayer string) {
	w.t.Helper()
	if v, l := w.servedFrom(market); v != wantV || l != wantLayer {
		w.t.Errorf("%s: version %d from %s, want %d from %s", market, v, l, wantV, wantLayer)
	}
}

// TestReaderNoticeInFlight: while a write's notice has not reached the
// node, node memory is bypassed (a client that saw the new version on
// another node never sees the old one here) and the answer read from Redis
// is not stored; once the notice arrives, memory answers again, with the
// new version.
func TestReaderNoticeInFlight(t *testing.T) {
	w := newReaderWorld(t)
	w.synced("m1")
	w.want("m1", 1, "memory")

	v := w.setPrice("m1", false) // written; its notice still in flight
	w.want("m1", v, "redis")
	w.want("m1", v, "redis") // and not stored meanwhile
	if got := metrictest.Value(t, w.reg, "marketdata_read_notices_lost_total"); got != 0 {
		t.Errorf("lost notices %v while in flight, want 0", got)
	}

	// The notice arrives.
	w.r.Notice(notice.Change{Seq: mustSeq(t, w.c), Markets: []string{"m1"}})
	w.want("m1", v, "redis")
	w.want("m1", v, "memory")
}

func mustSeq(t *testing.T, c *cache.Cache) int64 {
	t.Helper()
	seq, err := c.Seq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// TestReaderLostNotice: a change number whose notice never comes stops
// memory from answering only until the wait: then memory is dropped (the
// lost write's old version goes with it), the loss counted, and memory
// answers again.
func TestReaderLostNotice(t *testing.T) {
	w := newReaderWorld(t)
	w.synced("m1")
	w.synced("m2")
	lost := w.setPrice("m1", false) // its notice is lost
	w.setPrice("m2", true)          // a later one arrives
	w.want("m1", lost, "redis")
	w.advance(readerWait - time.Millisecond)
	w.want("m2", 2, "redis")
	w.advance(time.Millisecond)
	w.want("m2", 2, "redis") // memory was dropped: read again
	if got := metrictest.Value(t, w.reg, "marketdata_read_notices_lost_total"); got != 1 {
		t.Errorf("lost notices %v, want 1", got)
	}
	w.held("m2", 2)
	w.want("m1", lost, "redis")
	w.want("m1", lost, "memory")
}

// TestReaderCounterReset: Redis losing the change counter (a restart
// empty) restarts it at Redis's clock, far above: memory is bypassed for
// the wait and then dropped, without counting lost notices. A counter set
// far below what was applied drops memory at the first notice and starts
// over from it, trusting memory again after a notice's wait.
func TestReaderCounterReset(t *testing.T) {
	w := newReaderWorld(t)
	ctx := context.Background()
	w.synced("m1")
	w.synced("m2")
	key := w.seqKey
	before := mustSeq(t, w.c)
	if err := w.rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	v := w.setPrice("m1", true)
	if after := mustSeq(t, w.c); after <= before {
		t.Fatalf("the counter restarted at %d, want above the %d it had", after, before)
	}
	w.want("m2", 1, "redis") // the numbers jumped: not trusted yet
	w.advance(readerWait)
	w.want("m2", 1, "redis")
	w.held("m2", 1)
	w.want("m1", v, "redis")
	w.want("m1", v, "memory")

	// Set far below.
	if err := w.rdb.Set(ctx, key, 5, 0).Err(); err != nil {
		t.Fatal(err)
	}
	v2 := w.setPrice("m2", true) // number 6: memory dropped, numbers start over
	w.want("m1", v, "redis")
	// Numbers up to the new one may belong to writes in flight: memory
	// answers again only after a notice's wait.
	w.want("m1", v, "redis")
	w.advance(readerWait)
	w.want("m1", v, "redis")
	w.held("m1", v)
	w.want("m2", v2, "redis")
	w.want("m2", v2, "memory")
	if got := metrictest.Value(t, w.reg, "marketdata_read_notices_lost_total"); got != 0 {
		t.Errorf("lost notices %v after counter resets, want 0", got)
	}
}

// TestReaderUnknownHeld: an id Redis and the store both say is unknown is
// held as such (a poller asking for it costs Postgres one query, not one
// per poll), until a notice names it.
func TestReaderUnknownHeld(t *testing.T) {
	w := newReaderWorld(t)
	w.synced("m1")
	w.want("m9", 0, "store")
	w.want("m9", 0, "memory")
	// And for the trades route: the market is not found, from memory.
	if _, err := w.r.Trades(context.Background(), "m9", 10); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("trades of the unknown m9: %v, want ErrNotFound", err)
	}
	if got := w.reads("trades", "memory"); got != 1 {
		t.Errorf("trades of m9 answered from memory %v times, want 1", got)
	}

	w.write(store.Batch{Markets: []store.Market{activeMarket("m9", "E1")}}, true)
	v := w.setPrice("m9", true)
	w.want("m9", v, "redis")

	// The same for events.
	ctx := context.Background()
	for i, want := range []string{"store", "memory"} {
		before := w.reads("event", want)
		if ev, err := w.r.Event(ctx, "E9"); err != nil || ev.Found || ev.Body != nil {
			t.Fatalf("read %d of the unknown E9: %+v, %v", i, ev, err)
		}
		if w.reads("event", want) == before {
			t.Errorf("read %d of the unknown E9 not answered from %s", i, want)
		}
	}
	w.write(store.Batch{Events: []store.Event{*activeEvent("E9", "sports", map[string]string{"a": "A9", "c": "C9"})}}, true)
	if ev, err := w.r.Event(ctx, "E9"); err != nil || ev.Body == nil {
		t.Errorf("E9 after its notice: %+v, %v; want its body", ev, err)
	}
}

// TestReaderRepairsOnlyMissing: what Redis answered as missing is read from
// the store, written back and announced with its change number; what Redis
// did not answer is read from the store and not repaired.
func TestReaderRepairsOnlyMissing(t *testing.T) {
	w := newReaderWorld(t)
	ctx := context.Background()
	if err := w.rdb.Del(ctx, w.c.MarketKey("m2"), w.c.EventKey("E1")).Err(); err != nil {
		t.Fatal(err)
	}
	w.want("m2", 1, "store")
	n := <-w.sent
	if n.Seq == 0 || len(n.Markets) != 1 || n.Markets[0] != "m2" {
		t.Errorf("repair notice %+v, want m2 with a change number", n)
	}
	if ok, _ := w.rdb.Exists(ctx, w.c.MarketKey("m2")).Result(); ok != 1 {
		t.Error("m2 not written back to Redis")
	}
	if ev, err := w.r.Event(ctx, "E1"); err != nil || ev.Body == nil {
		t.Fatalf("E1 from the store: %+v, %v", ev, err)
	}
	if n := <-w.sent; len(n.Events) != 1 || n.Events[0] != "E1" || n.Seq == 0 {
		t.Errorf("repair notice %+v, want E1 with a change number", n)
	}

	// A Reader whose Redis does not answer: the store answers, nothing is
	// repaired.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { dead.Close() })
	down := w.reader(cache.New(dead, "x:", testRules()), w.st, prometheus.NewRegistry())
	items, err := down.Prices(ctx, []string{"m1", "m9"})
	if err != nil || !items[0].Shown() || items[1].Found {
		t.Fatalf("Prices with Redis down: %+v, %v; want m1 shown, m9 unknown", items, err)
	}
	if ev, err := down.Event(ctx, "E1"); err != nil || ev.Body == nil {
		t.Fatalf("Event with Redis down: %+v, %v", ev, err)
	}
	if tr, err := down.Trades(ctx, "m1", 5); err != nil || tr == nil {
		t.Fatalf("Trades with Redis down: %q, %v", tr, err)
	}
	select {
	case n := <-w.sent:
		t.Errorf("a repair while Redis does not answer: %+v", n)
	case <-time.After(200 * time.Millisecond): // repairs start at once; none came
	}
}

// TestReaderUnavailable: neither Redis nor the store answering is
// ErrUnavailable.
func TestReaderUnavailable(t *testing.T) {
	w := newReaderWorld(t)
	ctx := context.Background()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { dead.Close() })
	r := w.reader(cache.New(dead, "x:", testRules()), closedStore(t), prometheus.NewRegistry())
	for name, read := range map[string]func() error{
		"prices": func() error { _, err := r.Prices(ctx, []string{"m1"}); return err },
		"event":  func() error { _, err := r.Event(ctx, "E1"); return err },
		"trades": func() error { _, err := r.Trades(ctx, "m1", 5); return err },
		"page":   func() error { _, err := r.Page(ctx, store.ListFilter{}, "", 5); return err },
	} {
		if err := read(); !errors.Is(err, cache.ErrUnavailable) {
			t.Errorf("%s with Redis and the store down: %v, want ErrUnavailable", name, err)
		}
	}
}

// TestReaderPages: a page read from Redis is held; a notice of an event in
// its range drops it; while Redis lacks the whole listing pages come from
// the store and are not held.
func TestReaderPages(t *testing.T) {
	w := newReaderWorld(t)
	ctx := context.Background()
	if _, _, err := w.c.EnsureComplete(ctx, w.st); err != nil {
		t.Fatal(err)
	}
	w.synced("m1")
	page := func(want string) cache.Page {
		t.Helper()
		before := w.reads("page", want)
		pg, err := w.r.Page(ctx, store.ListFilter{}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if w.reads("page", want) == before {
			t.Errorf("page not answered from %s", want)
		}
		return pg
	}
	if pg := page("redis"); fmt.Sprint(pg.IDs) != "[E1]" {
		t.Fatalf("page %q, want [E1]", pg.IDs)
	}
	page("memory")
	w.write(store.Batch{Events: []store.Event{*activeEvent("E2", "sports", map[string]string{"a": "A2", "c": "C2"})}}, true)
	if pg := page("redis"); fmt.Sprint(pg.IDs) != "[E1 E2]" {
		t.Errorf("page after E2's notice %q, want [E1 E2]", pg.IDs)
	}
	if err := w.rdb.Del(ctx, strings.Replace(w.c.SetKey("x"), "f:x", "ok", 1)).Err(); err != nil {
		t.Fatal(err)
	}
	w.r.Notice(notice.Change{Flush: true})
	page("store")
	page("store")
}

// closedStore is a store whose connections are closed: every query fails.
func closedStore(t *testing.T) *store.Store {
	t.Helper()
	pool, err := store.Connect(context.Background(), testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	return store.New(pool)
}

// TestReaderRedisRefusing: a Redis that refuses connections (stopped) is
// "Redis does not answer": node memory serves what it holds (within its
// TTL) rather than sending every held item to Postgres, as it does when the
// round trip times out.
func TestReaderRedisRefusing(t *testing.T) {
	w := newReaderWorld(t)
	ctx := context.Background()
	priv, addr := testenv.PrivateRedis(t)
	// No retries: a refused dial fails the command at once, well inside
	// the read's budget (a retrying client would turn it into a timeout,
	// the other degraded path).
	fast := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { fast.Close() })
	pc := cache.New(fast, "p:", testRules())
	evs, err := w.st.EventDocsByID(ctx, []string{"E1"})
	if err != nil {
		t.Fatal(err)
	}
	mks, err := w.st.MarketDocsByID(ctx, []string{"m1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.ApplyDocs(ctx, evs, mks, nil); err != nil {
		t.Fatal(err)
	}
	w.reg = prometheus.NewRegistry()
	w.r = w.reader(pc, w.st, w.reg)
	w.synced("m1")
	want := w.price["m1"]
	w.held("m1", want)

	// The private server goes away: dials are refused from now on.
	if err := priv.Do(ctx, "SHUTDOWN", "NOSAVE").Err(); err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "connection") {
		t.Logf("shutdown: %v", err)
	}
	if err := priv.Ping(ctx).Err(); err == nil {
		t.Fatal("the private Redis still answers after SHUTDOWN")
	}
	w.want("m1", want, "memory")
}

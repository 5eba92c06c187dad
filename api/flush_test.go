package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// rtFlushPaths are read in this order after a flush: a snapshot first, whose
// repair writes M-a's price item, then M-a's trades, which must not take that
// price item as a sign that the trade list is in Redis too.
var rtFlushPaths = []string{
	"/public/v1/prices/snapshot?ids=M-a,m-b,m_c,nope,mm-1,rv-1",
	"/public/v1/markets/M-a/trades",
	"/public/v1/markets/M-a/trades?limit=200",
	"/public/v1/markets/M-a/trades?limit=3",
	"/public/v1/markets/r1/trades",
	"/public/v1/markets/m-b/trades",
	"/public/v1/markets/mm-1/trades",
	"/public/v1/markets/r-old/trades",
	"/public/v1/events/E-main",
	"/public/v1/events/rsv",
	"/public/v1/events/mrg",
	"/public/v1/events/solo",
	"/public/v1/events/nope",
	"/public/v1/events",
	"/public/v1/events?limit=100",
	"/public/v1/events?limit=7&category=politics&venue=venue_a",
	"/public/v1/events?min_venues=4",
	"/public/v1/markets/search",
	"/public/v1/markets/search?q=election&limit=50",
	"/public/v1/markets/search?q=_",
	"/public/v1/prices/snapshot?ids=rv-1,M-a",
}

// Redis loses every key of the deployment while nodes serve: each route
// answers exactly what it answered before (from Postgres), never 5xx; the
// read documents are repaired in Redis at once, the listing by the rebuild.
func TestFlushRedis(t *testing.T) {
	w := newWorld(t, withIngest())
	// A short resync makes the search index reload during the outage, from
	// Postgres since the listing is incomplete.
	n := w.node(t, withSearchResync(50*time.Millisecond))
	secret := rtSecret(t, w)
	rtFixture(t, w)
	w.settle(t, secret, n)
	ctx := t.Context()

	before := map[string]answer{}
	for _, path := range rtFlushPaths {
		before[path] = n.get(t, path, secret)
		if a := before[path]; a.status != http.StatusOK && a.status != http.StatusNotFound {
			t.Fatalf("%s before the flush: %d %s", path, a.status, a.body)
		}
	}
	// A cursor issued from Redis continues from Postgres, and back.
	page := rtDecodePage(t, n.get(t, "/public/v1/events?limit=7", secret))
	cursorPath := "/public/v1/events?limit=9&cursor=" + *page.NextCursor
	before[cursorPath] = n.get(t, cursorPath, secret)

	same := func(stage string) {
		t.Helper()
		for _, path := range append(rtFlushPaths, cursorPath) {
			a, b := n.get(t, path, secret), before[path]
			if a.status >= 500 {
				t.Errorf("%s %s: %d %s\nnode log:\n%s", stage, path, a.status, a.body, n.logs)
				continue
			}
			if a.status != b.status || string(a.body) != string(b.body) || etagHash(a.header.Get("ETag")) != etagHash(b.header.Get("ETag")) {
				t.Errorf("%s %s:\n got %d %.300s\nwant %d %.300s", stage, path, a.status, a.body, b.status, b.body)
			}
		}
	}
	complete := func() bool {
		t.Helper()
		ok, err := w.cache.ListingComplete(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	rtFlush(t, w)
	if complete() {
		t.Fatal("listing complete right after the flush")
	}
	same("after the flush")

	repaired := []string{w.cache.EventKey("E-main"), w.cache.EventKey("rsv"), w.cache.EventKey("mrg"),
		w.cache.MarketKey("M-a"), w.cache.MarketKey("rv-1"), w.cache.MarketKey("r1"),
		w.cache.TradesKey("M-a"), w.cache.TradesKey("r1")}
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, err := w.rdb.Exists(ctx, repaired...).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got == int64(len(repaired)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d documents repaired in Redis after 2s", got, len(repaired))
		}
		time.Sleep(20 * time.Millisecond) // polling Redis for the repairs
		// Price items a node holds are read again, and so repaired, once
		// its short-lived copy expires: keep reading, as pollers do.
		for _, path := range rtFlushPaths {
			n.get(t, path, secret)
		}
	}
	if got := w.rdb.ZCard(ctx, w.cache.TradesKey("M-a")).Val(); got != 200 {
		t.Errorf("M-a's trade list holds %d trades after repair, want 200", got)
	}
	n.searchReloaded(t) // from Postgres: the listing is incomplete
	if complete() {
		t.Fatal("listing complete without a rebuild")
	}
	same("repaired, listing from Postgres")

	// Ingest writes after a flush: a new price of r1 rewrites its price item
	// while its trade list is still lost.
	rtFlush(t, w)
	f := func(v float64) *float64 { return &v }
	w.publish(t, "price", "r1", map[string]any{"market_id": "r1", "version": 2, "ts": "2024-05-10T13:00:00Z",
		"quotes": map[string]ingest.QuoteMsg{"venue_a": {Bid: f(0.3), Ask: f(0.35), Volume24h: f(2)}}})
	// And an event republished unchanged at a higher version: its listing
	// entry is rewritten, and the node's search index re-reads it (from
	// Postgres: the listing is incomplete).
	ev := *w.model.events["Aev02"]
	v := *ev.Version + 1
	ev.Version = &v
	w.publish(t, "event", "Aev02", ev)
	w.settle(t, secret, n)
	a := n.get(t, "/public/v1/prices/snapshot?ids=r1", secret)
	if !strings.Contains(string(a.body), `"version":2`) {
		t.Errorf("r1 after its new price: %s, want version 2", a.body)
	}
	same("after an ingest write to a flushed cache")

	rebuilt, _, err := w.cache.EnsureComplete(ctx, w.st)
	if err != nil || !rebuilt {
		t.Fatalf("EnsureComplete = %v, %v; want a rebuild", rebuilt, err)
	}
	if !complete() {
		t.Fatal("listing incomplete after the rebuild")
	}
	n.searchReloaded(t) // from Redis again
	same("after the rebuild")
}

// etagHash is an ETag without the position a snapshot's names
// ("<hash>-<position>"): the position is the change number of the writes
// Redis holds, which a flush loses and the repairs replace, so only the
// hash of the same data stays the same across them.
func etagHash(tag string) string {
	if i := strings.LastIndexByte(tag, '-'); i >= 0 {
		return tag[:i] + `"`
	}
	return tag
}

// rtFlush deletes every key under prefix (other tests share the server).
func rtFlush(t *testing.T, w *world) {
	t.Helper()
	if err := rtDeleteAll(w); err != nil {
		t.Fatal(err)
	}
}

// rtDeleteAll is rtFlush for goroutines that must not call t.Fatal.
func rtDeleteAll(w *world) error {
	ctx := context.Background()
	var keys []string
	iter := w.rdb.Scan(ctx, 0, w.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return errors.New("nothing under the test prefix to flush")
	}
	return w.rdb.Del(ctx, keys...).Err()
}

// rtUnsent fails the limiter's pipelines (those with a PTTL) before they
// reach Redis and leaves their commands without answers, as go-redis does
// when it gets no connection in time.
type rtUnsent struct{}

func (rtUnsent) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (rtUnsent) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (rtUnsent) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "pttl" {
				return context.DeadlineExceeded
			}
		}
		return next(ctx, cmds)
	}
}

// When the round trip carrying a request's limits and reads is never sent,
// the limiter decides alone and the queued reads have no answer: every route
// answers from Postgres what a healthy node answers, never 5xx.
func TestFlushRoundTripNotSent(t *testing.T) {
	w := newWorld(t, withIngest())
	n := w.node(t)
	opt, err := redis.ParseURL(testenv.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(rtUnsent{})
	broken := w.node(t, withRedis(rdb))
	secret := rtSecret(t, w)
	rtFixture(t, w)
	w.settle(t, secret, n, broken)
	for _, path := range rtFlushPaths {
		a, b := broken.get(t, path, secret), n.get(t, path, secret)
		if a.status != b.status || string(a.body) != string(b.body) {
			t.Errorf("%s:\n got %d %.300s\nwant %d %.300s\nnode log:\n%.2000s", path, a.status, a.body, b.status, b.body, broken.logs)
		}
		wantLimitHeaders(t, a, true)
	}
}

// rtLoseOnScan deletes the test's keys just before the next HSCAN runs, as
// if Redis lost its data between the listing-marker check and the read.
type rtLoseOnScan struct {
	armed atomic.Bool
	lose  func()
}

func (h *rtLoseOnScan) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *rtLoseOnScan) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *rtLoseOnScan) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hscan" && h.armed.CompareAndSwap(true, false) {
			h.lose()
		}
		return next(ctx, cmd)
	}
}

// Redis losing its data while the search index reloads from it must not
// leave the index with what survived (nothing): it reads Postgres instead.
func TestFlushDuringSearchLoad(t *testing.T) {
	w := newWorld(t, withIngest())
	opt, err := redis.ParseURL(testenv.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	// loadsBefore is how many search Loads had completed when the hook ran,
	// in the Load that reads Redis: its own completion is the next.
	var loadsBefore atomic.Int64
	var n *node
	hook := &rtLoseOnScan{lose: func() {
		loadsBefore.Store(n.srv.SearchLoads())
		if err := rtDeleteAll(w); err != nil {
			t.Errorf("flush during the reload: %v", err)
		}
	}}
	rdb.AddHook(hook)
	n = w.node(t, withRedis(rdb), withSearchResync(300*time.Millisecond))
	secret := rtSecret(t, w)
	rtFixture(t, w)
	w.settle(t, secret, n)
	path := "/public/v1/markets/search?q=election&limit=50"
	before := n.get(t, path, secret)

	hook.armed.Store(true)
	deadline := time.Now().Add(2 * time.Second)
	for hook.armed.Load() || n.srv.SearchLoads() <= loadsBefore.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("no search reload installed within 2s (hook ran: %v)", !hook.armed.Load())
		}
		time.Sleep(5 * time.Millisecond) // polling the hook and the load count
	}
	if a := n.get(t, path, secret); a.status != before.status || string(a.body) != string(before.body) {
		t.Errorf("after Redis lost its data during a reload:\n got %d %.300s\nwant %d %.300s", a.status, a.body, before.status, before.body)
	}
}

package lbtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/marketdata/marketdata/client"
	"github.com/marketdata/marketdata/internal/servicetest"
)

// Through the balancer, snapshots are answered by every node, a stream gets its prices, and
// the failed-authentication limit counts the client's address (which HAProxy puts in
// X-Forwarded-For), not the balancer's: one address blocked leaves the others alone, and a
// client cannot pick its address by sending the header itself.
func TestThroughTheBalancer(t *testing.T) {
	const limit = 5
	tp := start(t, servicetest.Options{Env: map[string]string{
		"MD_AUTHFAIL_LIMIT": strconv.Itoa(limit), "MD_AUTHFAIL_WINDOW": "300s",
	}})
	svc := tp.svc
	w := svc.Seed("lb", 2, 3)
	ids := marketIDs(w)
	key := svc.NewKey("markets:read", "stream:read").Secret

	// A connection each: leastconn spreads them over the nodes.
	fresh := httpFrom("127.0.0.4", false)
	before := make([]float64, len(adminPorts))
	for i := range adminPorts {
		before[i] = nodeRequests(t, i, "/public/v1/prices/snapshot")
	}
	for range 30 {
		status, body, _, err := get(fresh, snapshotPath(ids), key)
		if err != nil || status != 200 {
			t.Fatalf("snapshot through the balancer: %d %s (%v)", status, body, err)
		}
		got, err := versions(body)
		if err != nil || len(got) != len(ids) {
			t.Fatalf("snapshot through the balancer: %d of %d markets (%v): %s", len(got), len(ids), err, body)
		}
	}
	for i := range adminPorts {
		if n := nodeRequests(t, i, "/public/v1/prices/snapshot") - before[i]; n == 0 {
			t.Errorf("api%d answered none of 30 snapshots through the balancer", i+1)
		}
	}

	// A stream through the balancer: prices, then a new version.
	c, err := client.New(key, client.WithBaseURL(lbURL))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st, err := c.Stream(ctx, ids[:2])
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close() //nolint:errcheck // the test is over; how the stream ends is not what it checks
	seen := map[string]int64{}
	next := func(want func() bool) {
		t.Helper()
		for !want() {
			ev, err := st.Next(ctx)
			if err != nil {
				t.Fatalf("stream through the balancer: %v (prices so far %v)", err, seen)
			}
			switch ev.Kind {
			case client.StreamPrice:
				seen[ev.Price.MarketID] = max(seen[ev.Price.MarketID], ev.Price.Version)
			case client.StreamDisconnected:
				t.Fatalf("stream through the balancer disconnected: %v", ev.Err)
			}
		}
	}
	next(func() bool { return seen[ids[0]] > 0 && seen[ids[1]] > 0 })
	p := &servicetest.Price{MarketID: ids[0], Quotes: map[string]servicetest.Quote{"venue_a": {Bid: 0.41, Ask: 0.45}}}
	svc.PublishPrice(p)
	next(func() bool { return seen[ids[0]] >= p.Version })
	// Idle past the node's 15 s ping: the balancer keeps a quiet stream open (its tunnel
	// timeout is longer than the ping interval), and the next price arrives on it.
	time.Sleep(17 * time.Second)
	p.Version = 0
	svc.PublishPrice(p)
	next(func() bool { return seen[ids[0]] >= p.Version })

	// The failed-authentication limit, by client address.
	blocked, other := httpFrom("127.0.0.2", true), httpFrom("127.0.0.3", true)
	bad := "md_" + "0000000000000000000000000000000000000000"
	for i := 1; i <= limit; i++ {
		if status, body, _, err := get(blocked, "/public/v1/events", bad); err != nil || status != 401 {
			t.Fatalf("failed authentication %d of %d from 127.0.0.2: %d %s (%v); want 401", i, limit, status, body, err)
		}
	}
	status, body, retry, err := get(blocked, "/public/v1/events", key)
	if err != nil || status != 429 || retry == "" {
		t.Fatalf("127.0.0.2 after %d failed authentications, with a good key: %d (Retry-After %q) %s (%v); want 429 with Retry-After", limit, status, retry, body, err)
	}
	// The header a client sends is not believed: HAProxy replaces it. A client at the
	// balancer's own address (trusted) claiming the blocked one is judged as itself; were
	// the header appended to, the node would take the claimed address.
	self := httpFrom("127.0.0.1", true)
	if status, body, _, err := get(self, "/public/v1/events", key, "X-Forwarded-For", "127.0.0.2"); err != nil || status != 200 {
		t.Errorf("127.0.0.1 claiming X-Forwarded-For 127.0.0.2 (blocked): %d %s (%v); want 200 (the balancer replaces the header)", status, body, err)
	}
	if status, body, _, err := get(other, "/public/v1/events", bad); err != nil || status != 401 {
		t.Errorf("127.0.0.3 with a bad key while 127.0.0.2 is blocked: %d %s (%v); want 401", status, body, err)
	}
	if status, body, _, err := get(other, "/public/v1/events", key); err != nil || status != 200 {
		t.Errorf("127.0.0.3 with a good key while 127.0.0.2 is blocked: %d %s (%v); want 200", status, body, err)
	}

	// The edge through the balancer: the node decides 431 for headers over 16 KiB (its
	// JSON answer); over the balancer's 32 KiB buffer HAProxy refuses the request itself
	// (400, with its own page: HAProxy 2.6 does not use errorfiles for what its parser
	// refuses).
	status, body, _, err = get(other, "/public/v1/events", key, "X-Padding", strings.Repeat("a", 20<<10))
	if err != nil || status != 431 || errorCode(body) != "invalid_request" {
		t.Errorf("a 20 KiB header through the balancer: %d %.200s (%v); want the node's 431 invalid_request", status, body, err)
	}
	// HAProxy answers 400 and closes as soon as its buffer is full, while the client may
	// still be writing: the client then sees the close (a broken pipe) rather than the
	// answer. Either way the request never reaches a node.
	if status, body, _, err := get(other, "/public/v1/events", key, "X-Padding", strings.Repeat("a", 40<<10)); (err == nil && status != 400) || (err != nil && !isClosed(err)) {
		t.Errorf("a 40 KiB header through the balancer: %d %.200s (%v); want 400 or the connection closed", status, body, err)
	}
	for n := 1; n <= 3; n++ {
		tp.mustLB("stop-node", strconv.Itoa(n))
	}
	status, body, retry, err = get(other, "/public/v1/events", key)
	if err != nil || status != 503 || errorCode(body) != "unavailable" || retry == "" {
		t.Errorf("no node up: %d (Retry-After %q) %.200s (%v); want 503 unavailable with Retry-After", status, retry, body, err)
	}
}

// isClosed reports whether err is the balancer closing the connection under a write.
func isClosed(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// errorCode is the code of an answer in the API's error shape, "" for anything else.
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return ""
	}
	return e.Error.Code
}

// streamWatch follows one stream's events: the newest version of each market, versions that
// went backwards, and its closes and reconnects.
type streamWatch struct {
	mu         sync.Mutex
	newest     map[string]int64
	backwards  []string
	goingAway  int // StreamDisconnected with 1001
	reconnects int
	other      []string // other disconnects
}

func (sw *streamWatch) follow(ctx context.Context, st *client.Stream) {
	for {
		ev, err := st.Next(ctx)
		if err != nil {
			return
		}
		sw.mu.Lock()
		switch ev.Kind {
		case client.StreamPrice:
			id, v := ev.Price.MarketID, ev.Price.Version
			if v < sw.newest[id] {
				sw.backwards = append(sw.backwards, fmt.Sprintf("%s v%d after v%d", id, v, sw.newest[id]))
			}
			sw.newest[id] = max(sw.newest[id], v)
		case client.StreamDisconnected:
			var closed *client.StreamClosedError
			if errors.As(ev.Err, &closed) && closed.Code == client.CloseGoingAway {
				sw.goingAway++
			} else {
				sw.other = append(sw.other, fmt.Sprint(ev.Err))
			}
		case client.StreamConnected:
			if ev.Reconnect {
				sw.reconnects++
			}
		}
		sw.mu.Unlock()
	}
}

func (sw *streamWatch) has(want map[string]int64) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for id, v := range want {
		if sw.newest[id] < v {
			return false
		}
	}
	return true
}

// poller polls one snapshot through the balancer on a keep-alive connection until ctx ends,
// counting answers and failures (anything but a 200: a transport error, a 502, a 503).
type poller struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	failures   []string
}

func (p *poller) run(ctx context.Context, from string, ids []string, key string) {
	hc := httpFrom(from, true)
	for ctx.Err() == nil {
		status, body, _, err := get(hc, snapshotPath(ids), key)
		if ctx.Err() != nil {
			return
		}
		if err == nil && status == 200 {
			p.ok.Add(1)
			continue
		}
		p.failed.Add(1)
		p.mu.Lock()
		if len(p.failures) < 10 {
			p.failures = append(p.failures, fmt.Sprintf("%s %d %.200s %v", time.Now().Format("15:04:05.000"), status, body, err))
		}
		p.mu.Unlock()
	}
}

// A rolling restart of the API nodes behind the balancer (SIGTERM one at a time, each back
// and ready before the next), while clients poll and stream and prices change: no poll
// fails, every stream is closed with 1001 at least once, reconnects, resubscribes, and ends
// with every market's last version, never having gone backwards.
func TestRollingRestartOfAPINodes(t *testing.T) {
	tp := start(t, servicetest.Options{})
	svc := tp.svc
	w := svc.Seed("roll", 2, 4)
	ids := marketIDs(w)
	key := svc.NewKey("markets:read", "stream:read").Secret
	pub := newPublisher(t, svc, w)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pubCtx, stopPub := context.WithCancel(ctx)
	pubErr := make(chan error, 1)
	go func() { pubErr <- pub.run(pubCtx, ids, 20*time.Millisecond, 0) }()

	pollCtx, stopPolls := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var polls poller
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			polls.run(pollCtx, "127.0.0."+strconv.Itoa(10+i), ids, key)
		}()
	}
	c, err := client.New(key, client.WithBaseURL(lbURL), client.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	watches := make([]*streamWatch, 3)
	for i := range watches {
		st, err := c.Stream(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close() //nolint:errcheck // the test is over; how the stream ends is not what it checks
		watches[i] = &streamWatch{newest: map[string]int64{}}
		go watches[i].follow(ctx, st)
	}
	awaitPolls := func(what string, more int64) {
		t.Helper()
		from := polls.ok.Load()
		deadline := time.Now().Add(30 * time.Second)
		for polls.ok.Load() < from+more {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d polls answered in 30 s, want %d", what, polls.ok.Load()-from, more)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	awaitPolls("before the restarts", 50)

	for n := 1; n <= 3; n++ {
		start := time.Now()
		tp.mustLB("restart-node", strconv.Itoa(n))
		t.Logf("api%d restarted in %s", n, time.Since(start).Round(time.Millisecond))
		awaitPolls(fmt.Sprintf("after api%d's restart", n), 50)
	}

	stopPub()
	if err := <-pubErr; err != nil {
		t.Fatalf("publishing: %v", err)
	}
	final := pub.last()
	deadline := time.Now().Add(20 * time.Second)
	for i, sw := range watches {
		for !sw.has(final) {
			if time.Now().After(deadline) {
				sw.mu.Lock()
				t.Fatalf("stream %d: newest versions %v 20 s after the last update, want %v", i, sw.newest, final)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stopPolls()
	wg.Wait()

	t.Logf("%d polls answered, %d failed; %d updates published", polls.ok.Load(), polls.failed.Load(), totalUpdates(pub, w))
	if polls.failed.Load() != 0 {
		t.Errorf("%d polls failed during the rolling restart; first: %v", polls.failed.Load(), polls.failures)
	}
	for i, sw := range watches {
		sw.mu.Lock()
		t.Logf("stream %d: %d closes with 1001, %d reconnects, other disconnects %v", i, sw.goingAway, sw.reconnects, sw.other)
		if sw.goingAway == 0 || sw.reconnects == 0 {
			t.Errorf("stream %d: %d closes with 1001 and %d reconnects; its node restarted, want at least one of each", i, sw.goingAway, sw.reconnects)
		}
		if len(sw.backwards) > 0 {
			t.Errorf("stream %d went backwards: %v", i, sw.backwards)
		}
		sw.mu.Unlock()
	}
}

func totalUpdates(p *publisher, w *servicetest.World) int64 {
	var n int64
	for _, pr := range w.Prices {
		n += p.last()[pr.MarketID] - pr.Version
	}
	return n
}

// freshness follows, through the balancer, when each published version is first served:
// a version counts as served once the snapshot shows it or a later one.
type freshness struct {
	pub  *publisher
	seen map[string]int64
	lags []lag
}

type lag struct {
	published time.Time
	took      time.Duration
}

func (f *freshness) observe(now time.Time, got map[string]int64) {
	for id, v := range got {
		for u := f.seen[id] + 1; u <= v; u++ {
			if at := f.pub.publishedAt(id, u); !at.IsZero() {
				f.lags = append(f.lags, lag{at, now.Sub(at)})
			}
		}
		f.seen[id] = max(f.seen[id], v)
	}
}

// within is the lags of the updates published in [from, to): their count, and the largest.
func (f *freshness) within(from, to time.Time) (int, time.Duration) {
	var n int
	var worst time.Duration
	for _, l := range f.lags {
		if !l.published.Before(from) && l.published.Before(to) {
			n++
			worst = max(worst, l.took)
		}
	}
	return n, worst
}

// A rolling restart of ingest (two workers share the consumer; each gets SIGTERM and is
// started again in turn) while prices change: no update is lost, and within 5 s of a new
// worker starting, updates are served within 1 s of their publication again.
func TestRollingRestartOfIngest(t *testing.T) {
	tp := start(t, servicetest.Options{IngestWorkers: 2})
	svc := tp.svc
	w := svc.Seed("ingroll", 2, 5)
	ids := marketIDs(w)
	key := svc.NewKey("markets:read").Secret
	pub := newPublisher(t, svc, w)
	f := &freshness{pub: pub, seen: map[string]int64{}}
	for _, pr := range w.Prices {
		f.seen[pr.MarketID] = pr.Version
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pubCtx, stopPub := context.WithCancel(ctx)
	pubErr := make(chan error, 1)
	go func() { pubErr <- pub.run(pubCtx, ids, 10*time.Millisecond, 10) }()

	// The prober: a snapshot every 20 ms through the balancer.
	var mu sync.Mutex
	probeCtx, stopProbe := context.WithCancel(ctx)
	probed := make(chan struct{})
	var probeErrs []string
	go func() {
		defer close(probed)
		hc := httpFrom("127.0.0.5", true)
		for probeCtx.Err() == nil {
			status, body, _, err := get(hc, snapshotPath(ids), key)
			now := time.Now()
			if err == nil && status == 200 {
				if got, err := versions(body); err == nil {
					mu.Lock()
					f.observe(now, got)
					mu.Unlock()
				}
			} else if probeCtx.Err() == nil && len(probeErrs) < 10 {
				probeErrs = append(probeErrs, fmt.Sprintf("%d %.200s %v", status, body, err))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	const back, window = 5 * time.Second, 3 * time.Second
	type restart struct {
		name    string
		started time.Time
	}
	var restarts []restart
	for _, n := range svc.Ingests {
		n.Stop()
		started := time.Now()
		n.Start()
		restarts = append(restarts, restart{n.Name, started})
		// Measure the window after "back": updates published then must be fresh.
		time.Sleep(time.Until(started.Add(back + window)))
	}

	stopPub()
	if err := <-pubErr; err != nil {
		t.Fatalf("publishing: %v", err)
	}
	final := pub.last()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		done := true
		for id, v := range final {
			done = done && f.seen[id] >= v
		}
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			t.Fatalf("20 s after the last update the balancer serves %v, want %v: updates lost", f.seen, final)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopProbe()
	<-probed

	mu.Lock()
	defer mu.Unlock()
	if len(probeErrs) > 0 {
		t.Errorf("snapshots through the balancer failed during the restarts: %v", probeErrs)
	}
	// Trades are kept one by one (a price only as its newest version): every trade
	// published is served.
	hc := httpFrom("127.0.0.5", true)
	published := 0
	for id, want := range pub.tradeIDs() {
		published += len(want)
		status, body, _, err := get(hc, "/public/v1/markets/"+id+"/trades?limit=200", key)
		if err != nil || status != 200 {
			t.Fatalf("trades of %s: %d %.200s (%v)", id, status, body, err)
		}
		var got struct {
			Data []struct {
				TradeID string `json:"trade_id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("trades of %s: %v", id, err)
		}
		have := map[string]bool{}
		for _, tr := range got.Data {
			have[tr.TradeID] = true
		}
		for _, tid := range want {
			if !have[tid] {
				t.Errorf("trade %s of %s was published and is not served: lost", tid, id)
			}
		}
	}
	if published == 0 {
		t.Error("no trade was published")
	}
	t.Logf("%d trades published, every one served", published)
	all := make([]time.Duration, len(f.lags))
	for i, l := range f.lags {
		all[i] = l.took
	}
	slices.Sort(all)
	if len(all) > 0 {
		t.Logf("%d updates: freshness p50 %s, p99 %s, max %s (through the balancer, 20 ms probe)", len(all),
			all[len(all)/2].Round(time.Millisecond), all[len(all)*99/100].Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond))
	}
	for _, r := range restarts {
		n, worst := f.within(r.started.Add(back), r.started.Add(back+window))
		t.Logf("%s started at %s: %d updates published %s–%s after, served within %s at worst",
			r.name, r.started.Format("15:04:05.000"), n, back, back+window, worst.Round(time.Millisecond))
		if n == 0 {
			t.Errorf("%s: no update published %s–%s after its start", r.name, back, back+window)
		}
		if worst >= time.Second {
			t.Errorf("%s: an update published %s–%s after the worker started took %s to be served; want under 1 s", r.name, back, back+window, worst)
		}
	}
}

package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/servicetest"
)

// The stream against the real service (internal/servicetest: the built
// marketdata binary, ingest and API nodes as child processes). Every
// message is decoded strictly: a field the server sends that Price or
// StreamMessage lacks fails the test.

// waitLong bounds every wait for the service: generous, the CI machine is
// loaded.
const waitLong = 30 * time.Second

// streamWatch consumes a stream in a goroutine of its own, as a program
// that keeps up does, and checks what a consumer relies on: a market's
// versions never go back, the same price never comes twice in a row.
type streamWatch struct {
	t *testing.T
	s *Stream

	mu       sync.Mutex
	events   []StreamEvent
	newest   map[string]*Price
	problems []string
	err      error
	done     chan struct{}
}

func watchStream(t *testing.T, s *Stream) *streamWatch {
	w := &streamWatch{t: t, s: s, newest: map[string]*Price{}, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ev, err := range s.Events(context.Background()) {
			w.mu.Lock()
			if err != nil {
				w.err = err
				w.mu.Unlock()
				return
			}
			w.events = append(w.events, ev)
			if ev.Kind == StreamPrice {
				p := ev.Price
				if old := w.newest[p.MarketID]; old != nil &&
					(p.Version < old.Version || p.Version == old.Version && samePrice(p, old)) {
					w.problems = append(w.problems, fmt.Sprintf("%s version %d after %d", p.MarketID, p.Version, old.Version))
				}
				w.newest[p.MarketID] = p
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		s.Close() //nolint:errcheck // Close returns nil
		<-w.done
		w.mu.Lock()
		defer w.mu.Unlock()
		kinds := map[StreamEventKind]int{}
		for _, ev := range w.events {
			kinds[ev.Kind]++
			if ev.Kind == StreamDisconnected {
				t.Logf("disconnected (attempt %d, retry in %v): %v", ev.Attempts, ev.RetryIn, ev.Err)
			}
		}
		t.Logf("events: %v; conflated in the client: %d", kinds, s.Conflated())
		if len(w.problems) > 0 {
			t.Errorf("stream consumer saw: %v", w.problems)
		}
	})
	return w
}

// until waits for cond over the watch's state.
func (w *streamWatch) until(what string, cond func() (bool, string)) {
	w.t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		w.mu.Lock()
		ok, note := cond()
		err := w.err
		w.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			w.t.Fatalf("stream ended (%v) before %s (last: %s)", err, what, note)
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("not %s within %s (last: %s)", what, waitLong, note)
		}
		time.Sleep(20 * time.Millisecond) // the watch's state has no event to wait on
	}
}

// has waits until every market is at least at its version in want.
func (w *streamWatch) has(want map[string]int64) {
	w.t.Helper()
	w.until(fmt.Sprintf("%d markets at their versions", len(want)), func() (bool, string) {
		for id, v := range want {
			if p := w.newest[id]; p == nil || p.Version < v {
				got := int64(0)
				if p != nil {
					got = p.Version
				}
				return false, fmt.Sprintf("%s at %d, want %d", id, got, v)
			}
		}
		return true, ""
	})
}

// kinds counts the events of each kind so far.
func (w *streamWatch) count(match func(StreamEvent) bool) int {
	n := 0
	for _, ev := range w.events {
		if match(ev) {
			n++
		}
	}
	return n
}

func newServiceClient(t *testing.T, svc *servicetest.Service, secret string, opts ...Option) *Client {
	t.Helper()
	c, err := New(secret, append([]Option{WithBaseURL(svc.URL()), WithBackoff(50*time.Millisecond, 500*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func marketIDs(w *servicetest.World) []string {
	ids := make([]string, len(w.Markets))
	for i, m := range w.Markets {
		ids[i] = m.ID
	}
	return ids
}

// publishRound publishes a new version of every market's price and
// returns the versions.
func publishRound(svc *servicetest.Service, w *servicetest.World, round int) map[string]int64 {
	want := map[string]int64{}
	for i, m := range w.Markets {
		bid := float64((round*7+i)%90+5) / 100
		p := &servicetest.Price{MarketID: m.ID, Quotes: map[string]servicetest.Quote{
			"venue_a": {Bid: bid, Ask: bid + 0.02, Last: bid, Volume24h: float64(round)},
		}}
		svc.PublishPrice(p)
		want[m.ID] = p.Version
	}
	return want
}

// putPrice publishes a new price of a market, waits until it is served
// and returns its version.
func putPrice(svc *servicetest.Service, id string, bid float64) int64 {
	p := &servicetest.Price{MarketID: id, Quotes: map[string]servicetest.Quote{"venue_a": {Bid: bid, Ask: bid + 0.01}}}
	svc.PutPrice(p)
	return p.Version
}

// TestStreamService: subscribe → snapshot → live updates in version order;
// Subscribe/Unsubscribe while running; the API node killed (SIGKILL) and
// started again, then stopped (SIGTERM: 1001) and started again: the
// stream reconnects by itself and has the newest version of every market.
func TestStreamService(t *testing.T) {
	strictStreams(t)
	svc := servicetest.Start(t, servicetest.Options{})
	world := svc.Seed("cs", 2, 3)
	ids := marketIDs(world)
	key := svc.NewKey("markets:read", "stream:read")
	c := newServiceClient(t, svc, key.Secret)

	ctx := context.Background()
	s, err := c.Stream(ctx, append(ids[:5:5], "cs-nope"))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	w := watchStream(t, s)
	seeded := map[string]int64{}
	for _, p := range world.Prices[:5] {
		seeded[p.MarketID] = p.Version
	}
	w.has(seeded)
	w.mu.Lock()
	evs := slices.Clone(w.events)
	w.mu.Unlock()
	// The order: connected, the ack (with the missing id), then the
	// snapshot of every accepted market.
	if len(evs) < 7 || evs[0].Kind != StreamConnected || evs[0].Reconnect || evs[1].Kind != StreamSubscribed ||
		evs[1].Resubscribe || len(evs[1].MarketIDs) != 5 || !slices.Equal(evs[1].Missing, []string{"cs-nope"}) {
		t.Fatalf("first events %+v: want connected, subscribed (5 accepted, cs-nope missing), then prices", evs)
	}
	for _, ev := range evs[2:7] {
		if ev.Kind != StreamPrice || ev.Price.Version != seeded[ev.Price.MarketID] {
			t.Fatalf("snapshot event %+v: want the seeded price", ev)
		}
	}
	if got := s.Markets(); !slices.Equal(got, ids[:5]) {
		t.Fatalf("Markets() = %v, want %v (the missing one dropped)", got, ids[:5])
	}

	var live map[string]int64 // the versions of the last round
	t.Run("live", func(t *testing.T) {
		// Ten rounds of changes: every one arrives, in version order per
		// market (the watch checks the order; conflation may skip one a
		// slow moment superseded, never the last).
		for round := 1; round <= 10; round++ {
			live = publishRound(svc, world, round)
		}
		want := maps.Clone(live)
		delete(want, ids[5]) // not subscribed
		w.has(want)
		w.mu.Lock()
		defer w.mu.Unlock()
		if p := w.newest[ids[5]]; p != nil {
			t.Fatalf("a price of %s, which is not subscribed: %+v", ids[5], p)
		}
	})

	t.Run("subscribe-unsubscribe", func(t *testing.T) {
		if err := s.Unsubscribe(ids[0]); err != nil {
			t.Fatal(err)
		}
		if err := s.Subscribe(ids[5]); err != nil {
			t.Fatal(err)
		}
		w.until("the unsubscribe and the subscribe acknowledged", func() (bool, string) {
			un := w.count(func(ev StreamEvent) bool { return ev.Kind == StreamUnsubscribed && slices.Equal(ev.MarketIDs, ids[:1]) })
			sub := w.count(func(ev StreamEvent) bool {
				return ev.Kind == StreamSubscribed && slices.Equal(ev.MarketIDs, ids[5:6]) && len(ev.Missing) == 0
			})
			return un == 1 && sub == 1, fmt.Sprintf("%d unsubscribed, %d subscribed", un, sub)
		})
		w.has(map[string]int64{ids[5]: live[ids[5]]})
		w.mu.Lock()
		before := w.newest[ids[0]].Version
		w.mu.Unlock()
		// A change of the unsubscribed market, served before a change of a
		// subscribed one that the stream then delivers: the first never
		// comes.
		v0 := putPrice(svc, ids[0], 0.5)
		w.has(map[string]int64{ids[1]: putPrice(svc, ids[1], 0.5)})
		w.mu.Lock()
		after := w.newest[ids[0]].Version
		w.mu.Unlock()
		if after != before {
			t.Fatalf("%s unsubscribed, and version %d came after %d", ids[0], after, before)
		}
		if err := s.Subscribe(ids[0]); err != nil {
			t.Fatal(err)
		}
		// Subscribed again, it gets its current price again.
		w.has(map[string]int64{ids[0]: v0})
		if got := s.Markets(); len(got) != 6 {
			t.Fatalf("Markets() = %v, want all 6", got)
		}
	})

	t.Run("kill", func(t *testing.T) {
		svc.APIs[0].Kill()
		w.until("a disconnect seen", func() (bool, string) {
			return w.count(func(ev StreamEvent) bool { return ev.Kind == StreamDisconnected }) > 0, ""
		})
		// Changes while the node is down: the snapshot after the reconnect
		// brings them.
		var want map[string]int64
		for round := 11; round <= 13; round++ {
			want = publishRound(svc, world, round)
		}
		reconnects := w.countLocked(func(ev StreamEvent) bool { return ev.Kind == StreamConnected && ev.Reconnect })
		svc.APIs[0].Start()
		w.until("reconnected and resubscribed", func() (bool, string) {
			con := w.count(func(ev StreamEvent) bool { return ev.Kind == StreamConnected && ev.Reconnect })
			sub := w.count(func(ev StreamEvent) bool {
				return ev.Kind == StreamSubscribed && ev.Resubscribe && len(ev.MarketIDs) == 6
			})
			return con > reconnects && sub > 0, fmt.Sprintf("%d reconnects, %d resubscribes", con, sub)
		})
		w.has(want)
		w.mu.Lock()
		defer w.mu.Unlock()
		var d StreamEvent
		for _, ev := range w.events {
			if ev.Kind == StreamDisconnected {
				d = ev
				break
			}
		}
		if d.Err == nil || d.Attempts < 1 || d.RetryIn <= 0 {
			t.Fatalf("disconnect event %+v: want its cause, attempts and wait", d)
		}
	})

	t.Run("sigterm", func(t *testing.T) {
		svc.APIs[0].Stop()
		w.until("a 1001 close seen", func() (bool, string) {
			n := w.count(func(ev StreamEvent) bool {
				var ce *StreamClosedError
				return ev.Kind == StreamDisconnected && errors.As(ev.Err, &ce) && ce.Code == CloseGoingAway
			})
			return n > 0, ""
		})
		svc.APIs[0].Start()
		want := publishRound(svc, world, 14)
		w.has(want)
		if err := s.Err(); err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
	})
}

// countLocked is count under the watch's lock.
func (w *streamWatch) countLocked(match func(StreamEvent) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count(match)
}

// TestStreamServiceSlowConsumer: a consumer that takes nothing while
// hundreds of changes come is not closed by the server (the client reads
// on), and then gets the newest version of each market, conflated.
func TestStreamServiceSlowConsumer(t *testing.T) {
	strictStreams(t)
	svc := servicetest.Start(t, servicetest.Options{})
	world := svc.Seed("cz", 1, 2)
	ids := marketIDs(world)
	c := newServiceClient(t, svc, svc.NewKey("markets:read", "stream:read").Secret)
	s, err := c.Stream(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() //nolint:errcheck // Close returns nil
	// The snapshot waits in the stream before the changes begin (a change
	// published before the subscribe would be in the snapshot instead).
	deadline := time.Now().Add(waitLong)
	for {
		s.mu.Lock()
		n := len(s.q.pending)
		s.mu.Unlock()
		if n == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d prices of the snapshot wait in the stream after %s, want %d", n, waitLong, len(ids))
		}
		time.Sleep(10 * time.Millisecond) // the consumer must not read: no event to wait on
	}
	var want map[string]int64
	for round := 1; round <= 150; round++ {
		want = publishRound(svc, world, round)
	}
	// Wait until the service serves the last round, and the stream
	// conflated some: only then read.
	want[ids[0]] = putPrice(svc, ids[0], 0.33)
	deadline = time.Now().Add(waitLong)
	for s.Conflated() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no price conflated within %s", waitLong)
		}
		time.Sleep(20 * time.Millisecond) // the stream offers no event for it
	}
	got := map[string]int64{}
	prices := 0
	for !maps.Equal(got, want) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		ev, err := s.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Next: %v (have %v, want %v)", err, got, want)
		}
		switch ev.Kind {
		case StreamPrice:
			prices++
			if v := got[ev.Price.MarketID]; ev.Price.Version <= v {
				t.Fatalf("%s version %d after %d", ev.Price.MarketID, ev.Price.Version, v)
			}
			got[ev.Price.MarketID] = ev.Price.Version
		case StreamDisconnected:
			t.Fatalf("disconnected: %v", ev.Err)
		}
	}
	if prices >= 2*151 {
		t.Fatalf("%d prices for 2 markets of 151 changes each: nothing was conflated", prices)
	}
	t.Logf("%d prices handed out for 302 changes; %d conflated in the client", prices, s.Conflated())
}

// countingTransport counts the requests (stream upgrades) it carries.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestStreamServiceAuth: a revoked key ends the stream with 4401, an
// account whose access is withdrawn with 4403, each within a few seconds;
// a key without stream:read gets the typed 403 insufficient_scope at once
// (one upgrade, no retry), an unknown key the 401.
func TestStreamServiceAuth(t *testing.T) {
	strictStreams(t)
	svc := servicetest.Start(t, servicetest.Options{})
	world := svc.Seed("ca", 1, 1)
	ids := marketIDs(world)

	ended := func(t *testing.T, s *Stream, code int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		for {
			ev, err := s.Next(ctx)
			if err == nil {
				if ev.Kind == StreamDisconnected {
					t.Fatalf("disconnected (%v) instead of ending with %d", ev.Err, code)
				}
				continue
			}
			var ce *StreamClosedError
			if !errors.As(err, &ce) || ce.Code != code {
				t.Fatalf("stream ended with %v, want a *StreamClosedError %d", err, code)
			}
			if ce.Reason == "" {
				t.Fatalf("close %d without a reason", code)
			}
			select {
			case <-s.Done():
			case <-ctx.Done():
				t.Fatal("Done not closed after the end")
			}
			if err := s.Subscribe(ids...); !errors.Is(err, ce) {
				t.Fatalf("Subscribe after the end: %v, want the end's error", err)
			}
			return
		}
	}
	open := func(t *testing.T, secret string) *Stream {
		t.Helper()
		s, err := newServiceClient(t, svc, secret).Stream(context.Background(), ids)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() }) //nolint:errcheck // Close returns nil
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		for {
			ev, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("no price: %v", err)
			}
			if ev.Kind == StreamPrice {
				return s
			}
		}
	}

	t.Run("revoked", func(t *testing.T) {
		key := svc.NewKey("stream:read")
		s := open(t, key.Secret)
		svc.RevokeKey(key.KeyID)
		ended(t, s, CloseKeyRevoked)
		// The revoked key's next stream is refused at the upgrade.
		_, err := newServiceClient(t, svc, key.Secret).Stream(context.Background(), ids)
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Code != "unauthorized" {
			t.Fatalf("Stream with a revoked key: %v, want a *Error 401 unauthorized", err)
		}
	})

	t.Run("withdrawn", func(t *testing.T) {
		key := svc.NewKey("stream:read")
		s := open(t, key.Secret)
		svc.WithdrawAccess(key.AccountID)
		ended(t, s, CloseAccessWithdrawn)
	})

	t.Run("scope", func(t *testing.T) {
		key := svc.NewKey("markets:read")
		tr := &countingTransport{}
		c := newServiceClient(t, svc, key.Secret, WithHTTPClient(&http.Client{Transport: tr}), WithMaxRetries(4))
		_, err := c.Stream(context.Background(), ids)
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusForbidden || e.Code != "insufficient_scope" || e.Message == "" || e.RequestID == "" {
			t.Fatalf("Stream without stream:read: %v, want a *Error 403 insufficient_scope with its message and request id", err)
		}
		if n := tr.n.Load(); n != 1 {
			t.Fatalf("%d upgrades, want 1 (no retry of a 403)", n)
		}
	})

	t.Run("unknown", func(t *testing.T) {
		key := svc.NewKey("stream:read")
		bad := key.Secret[:len(key.Secret)-8] + "AAAAAAAA" // fails the checksum
		_, err := newServiceClient(t, svc, bad).Stream(context.Background(), ids)
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
			t.Fatalf("Stream with an unknown key: %v, want a *Error 401", err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		key := svc.NewKey("stream:read")
		ctx, cancel := context.WithCancel(context.Background())
		s, err := newServiceClient(t, svc, key.Secret).Stream(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		select {
		case <-s.Done():
		case <-time.After(waitLong):
			t.Fatal("the stream did not end after its context did")
		}
		if _, err := s.Next(context.Background()); !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after the cancel: %v, want context.Canceled", err)
		}
	})
}

// TestStreamServiceStreamLimit: the account's 11th stream is refused with
// 429 and Retry-After; with retries allowed it opens once one of the ten
// closes.
func TestStreamServiceStreamLimit(t *testing.T) {
	strictStreams(t)
	svc := servicetest.Start(t, servicetest.Options{})
	world := svc.Seed("cl", 1, 1)
	ids := marketIDs(world)
	key := svc.NewKey("stream:read")
	var open []*Stream
	for range 10 {
		s, err := newServiceClient(t, svc, key.Secret).Stream(context.Background(), ids)
		if err != nil {
			t.Fatalf("stream %d: %v", len(open)+1, err)
		}
		open = append(open, s)
		t.Cleanup(func() { s.Close() }) //nolint:errcheck // Close returns nil
	}
	_, err := newServiceClient(t, svc, key.Secret, WithMaxRetries(0)).Stream(context.Background(), ids)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Code != "rate_limited" ||
		e.RetryAfter <= 0 || e.RetryAfter > 16*time.Second {
		t.Fatalf("the 11th stream: %v, want a *Error 429 rate_limited with a Retry-After within the 15 s lease", err)
	}
	// With retries: refused once, it waits Retry-After, and by then a slot
	// is free.
	tr := &statusTransport{}
	type result struct {
		s   *Stream
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := newServiceClient(t, svc, key.Secret, WithMaxRetries(3), WithHTTPClient(&http.Client{Transport: tr})).
			Stream(context.Background(), ids)
		got <- result{s, err}
	}()
	deadline := time.Now().Add(waitLong)
	for !slices.Contains(tr.seen(), http.StatusTooManyRequests) {
		if time.Now().After(deadline) {
			t.Fatalf("no 429 for the 11th stream within %s: %v", waitLong, tr.seen())
		}
		time.Sleep(10 * time.Millisecond) // the transport offers no event for it
	}
	if err := open[0].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the 11th stream after one closed: %v", r.err)
		}
		r.s.Close() //nolint:errcheck // Close returns nil
	case <-time.After(2 * waitLong):
		t.Fatal("the 11th stream did not open after one closed")
	}
	if st := tr.seen(); !slices.Equal(st, []int{http.StatusTooManyRequests, http.StatusSwitchingProtocols}) {
		t.Fatalf("upgrade answers %v, want a 429 then the 101", st)
	}
}

// statusTransport records the status of each answer it carries.
type statusTransport struct {
	mu       sync.Mutex
	statuses []int
}

func (s *statusTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		s.mu.Lock()
		s.statuses = append(s.statuses, resp.StatusCode)
		s.mu.Unlock()
	}
	return resp, err
}

func (s *statusTransport) seen() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.statuses)
}

// strictStreams makes the streams the test opens decode strictly (unknown
// fields refused) and restores the setting when the test ends, so that it
// does not leak into the tests that run after.
func strictStreams(t *testing.T) {
	t.Helper()
	prev := streamStrict.Swap(true)
	t.Cleanup(func() { streamStrict.Store(prev) })
}

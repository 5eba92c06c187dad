package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// What the real service never does on purpose, against a scripted
// WebSocket server: a seq gap, a malformed message, 503 and 429 at the
// upgrade, an "unavailable" answer to a subscribe; and what the server
// sees of the client: its commands, and the 1000 close when the stream's
// context ends.

// fakeConn is one accepted connection of the fake server.
type fakeConn struct {
	t    *testing.T
	ws   *websocket.Conn
	seq  int64
	cmds chan map[string]any
	// closed is the client's close (its status), when it closes.
	closed chan websocket.StatusCode
}

// send writes a message with the next seq; extra are its other fields.
func (c *fakeConn) send(typ string, extra string) {
	c.seq++
	c.sendSeq(typ, c.seq, extra)
}

func (c *fakeConn) sendSeq(typ string, seq int64, extra string) {
	msg := fmt.Sprintf(`{"type":%q,"seq":%d%s}`, typ, seq, extra)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.ws.Write(ctx, websocket.MessageText, []byte(msg)) //nolint:errcheck // the client's end shows in the test
}

func (c *fakeConn) price(id string, v int64) {
	c.send("price", fmt.Sprintf(`,"market_id":%q,"event_id":"ev","status":"active","quotes":{},"best_bid":null,"best_ask":null,"version":%d,"updated_at":"2026-01-01T00:00:00Z"`, id, v))
}

// cmd waits for the client's next command.
func (c *fakeConn) cmd() (op string, ids []string) {
	c.t.Helper()
	select {
	case m := <-c.cmds:
		for _, id := range m["market_ids"].([]any) {
			ids = append(ids, id.(string))
		}
		return m["op"].(string), ids
	case <-time.After(waitLong):
		c.t.Fatal("no command from the client")
		return "", nil
	}
}

// ack answers a subscribe of ids, all accepted.
func (c *fakeConn) ack(ids []string) {
	b, _ := json.Marshal(ids)
	c.send("subscribed", fmt.Sprintf(`,"market_ids":%s,"missing":[]`, b))
}

// fakeServer runs script for each upgrade; refuse, if set, answers an
// upgrade with a status instead (nil: upgrade).
type fakeServer struct {
	srv    *httptest.Server
	conns  chan *fakeConn
	mu     sync.Mutex
	refuse []func(w http.ResponseWriter) // one per upgrade, in order
	tries  int
}

func newFakeServer(t *testing.T) *fakeServer {
	f := &fakeServer{conns: make(chan *fakeConn, 8)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/public/v1/stream" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.tries++
		var refuse func(http.ResponseWriter)
		if len(f.refuse) > 0 {
			refuse, f.refuse = f.refuse[0], f.refuse[1:]
		}
		f.mu.Unlock()
		if refuse != nil {
			refuse(w)
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := &fakeConn{t: t, ws: ws, cmds: make(chan map[string]any, 16), closed: make(chan websocket.StatusCode, 1)}
		f.conns <- c
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				c.closed <- websocket.CloseStatus(err)
				return
			}
			var m map[string]any
			if json.Unmarshal(data, &m) == nil {
				c.cmds <- m
			}
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) upgrades() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries
}

func (f *fakeServer) next(t *testing.T) *fakeConn {
	t.Helper()
	select {
	case c := <-f.conns:
		return c
	case <-time.After(waitLong):
		t.Fatal("the client did not connect")
		return nil
	}
}

func (f *fakeServer) client(t *testing.T, opts ...Option) *Client {
	c, err := New("k", append([]Option{WithBaseURL(f.srv.URL), WithBackoff(time.Millisecond, 20*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// open opens a stream of a client of f subscribed to ids; the caller
// closes it.
func (f *fakeServer) open(t *testing.T, ids ...string) *Stream {
	t.Helper()
	s, err := f.client(t).Stream(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func refuseWith(status int, retryAfter, code string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("X-Request-Id", "req-1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"refused"}}`, code) //nolint:errcheck // the client sees what arrives
	}
}

// nextEvent takes the stream's next event within waitLong.
func nextEvent(t *testing.T, s *Stream) StreamEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ev, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

func expectKind(t *testing.T, s *Stream, k StreamEventKind) StreamEvent {
	t.Helper()
	ev := nextEvent(t, s)
	if ev.Kind != k {
		t.Fatalf("event %+v, want %s", ev, k)
	}
	return ev
}

func TestStreamSeqGapReconnects(t *testing.T) {
	f := newFakeServer(t)
	s := f.open(t, "a", "b")
	defer s.Close() //nolint:errcheck // Close returns nil
	c1 := f.next(t)
	if op, ids := c1.cmd(); op != "subscribe" || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("first command %s %v", op, ids)
	}
	c1.ack([]string{"a", "b"})
	c1.price("a", 3)
	c1.sendSeq("price", 9, `,"market_id":"b","event_id":"ev","status":"active","quotes":{},"best_bid":null,"best_ask":null,"version":1,"updated_at":"2026-01-01T00:00:00Z"`)
	expectKind(t, s, StreamConnected)
	expectKind(t, s, StreamSubscribed)
	if ev := expectKind(t, s, StreamPrice); ev.Price.MarketID != "a" || ev.Price.Version != 3 {
		t.Fatalf("price %+v, want a@3", ev.Price)
	}
	ev := expectKind(t, s, StreamDisconnected)
	var gap *SeqGapError
	if !errors.As(ev.Err, &gap) || gap.Want != 3 || gap.Got != 9 {
		t.Fatalf("disconnected by %v, want a *SeqGapError 3/9", ev.Err)
	}
	// The new connection subscribes everything again; its snapshot repeats
	// a@3 (dropped), brings b and a newer a.
	c2 := f.next(t)
	if op, ids := c2.cmd(); op != "subscribe" || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("command after the reconnect: %s %v", op, ids)
	}
	c2.ack([]string{"a", "b"})
	c2.price("a", 3)
	c2.price("b", 1)
	c2.price("a", 2) // older than what the consumer has: dropped
	c2.price("a", 4)
	if ev := expectKind(t, s, StreamConnected); !ev.Reconnect {
		t.Fatalf("%+v: want a reconnect", ev)
	}
	if ev := expectKind(t, s, StreamSubscribed); !ev.Resubscribe {
		t.Fatalf("%+v: want a resubscribe", ev)
	}
	var got []string
	for len(got) < 2 {
		ev := expectKind(t, s, StreamPrice)
		got = append(got, fmt.Sprintf("%s@%d", ev.Price.MarketID, ev.Price.Version))
	}
	if !slices.Equal(got, []string{"b@1", "a@4"}) {
		t.Fatalf("prices after the reconnect %v, want b@1 then a@4", got)
	}
}

func TestStreamMalformedMessageReconnects(t *testing.T) {
	f := newFakeServer(t)
	s := f.open(t)
	defer s.Close() //nolint:errcheck // Close returns nil
	c1 := f.next(t)
	c1.ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"price","seq":1,"market_id":"a b"}`)) //nolint:errcheck // checked by the client's reaction
	expectKind(t, s, StreamConnected)
	ev := expectKind(t, s, StreamDisconnected)
	var pe *StreamProtocolError
	if !errors.As(ev.Err, &pe) {
		t.Fatalf("disconnected by %v, want a *StreamProtocolError", ev.Err)
	}
	f.next(t)
	if ev := expectKind(t, s, StreamConnected); !ev.Reconnect {
		t.Fatalf("%+v: want a reconnect", ev)
	}
}

func TestStreamUpgradeRetries(t *testing.T) {
	f := newFakeServer(t)
	f.refuse = []func(http.ResponseWriter){
		refuseWith(http.StatusServiceUnavailable, "", "unavailable"),
		refuseWith(http.StatusTooManyRequests, "1", "rate_limited"),
	}
	start := time.Now()
	s, err := f.client(t).Stream(context.Background(), []string{"a"})
	if err != nil {
		t.Fatalf("Stream after a 503 and a 429: %v", err)
	}
	defer s.Close() //nolint:errcheck // Close returns nil
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("opened %v after a 429 with Retry-After: 1", waited)
	}
	f.next(t)
	if n := f.upgrades(); n != 3 {
		t.Fatalf("%d upgrades, want 3", n)
	}
}

func TestStreamUpgradeRefusals(t *testing.T) {
	for _, c := range []struct {
		refuse  func(http.ResponseWriter)
		opts    []Option
		status  int
		tries   int
		retryIn time.Duration
	}{
		{refuseWith(http.StatusForbidden, "", "insufficient_scope"), nil, 403, 1, 0},
		{refuseWith(http.StatusUnauthorized, "", "unauthorized"), nil, 401, 1, 0},
		// Longer than WithMaxRetryAfter allows: returned at once.
		{refuseWith(http.StatusTooManyRequests, "120", "rate_limited"), nil, 429, 1, 120 * time.Second},
		// 503s until the retries are spent.
		{refuseWith(http.StatusServiceUnavailable, "", "unavailable"), []Option{WithMaxRetries(2)}, 503, 3, 0},
	} {
		f := newFakeServer(t)
		f.refuse = []func(http.ResponseWriter){c.refuse, c.refuse, c.refuse, c.refuse}
		_, err := f.client(t, c.opts...).Stream(context.Background(), []string{"a"})
		var e *Error
		if !errors.As(err, &e) || e.Status != c.status || e.Message != "refused" || e.RequestID != "req-1" || e.RetryAfter != c.retryIn {
			t.Fatalf("Stream refused with %d: %v (%+v)", c.status, err, e)
		}
		if n := f.upgrades(); n != c.tries {
			t.Fatalf("refused with %d: %d upgrades, want %d", c.status, n, c.tries)
		}
	}
}

func TestStreamUnavailableSubscribesAgain(t *testing.T) {
	f := newFakeServer(t)
	s := f.open(t, "a")
	defer s.Close() //nolint:errcheck // Close returns nil
	c := f.next(t)
	c.cmd()
	c.send("error", `,"code":"unavailable","message":"prices cannot be read right now"`)
	expectKind(t, s, StreamConnected)
	ev := expectKind(t, s, StreamRefused)
	var ce *StreamCommandError
	if !errors.As(ev.Err, &ce) || ce.Code != "unavailable" || ce.Op != "subscribe" || !slices.Equal(ce.MarketIDs, []string{"a"}) {
		t.Fatalf("refused event %+v", ev)
	}
	// The same connection subscribes again after a backoff.
	if op, ids := c.cmd(); op != "subscribe" || !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("command %s %v, want the subscribe again", op, ids)
	}
	c.ack([]string{"a"})
	c.price("a", 1)
	expectKind(t, s, StreamSubscribed)
	expectKind(t, s, StreamPrice)

	// invalid_request: the markets are dropped.
	if err := s.Subscribe("b"); err != nil {
		t.Fatal(err)
	}
	c.cmd()
	c.send("error", `,"code":"invalid_request","message":"no"`)
	expectKind(t, s, StreamRefused)
	if got := s.Markets(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Markets() = %v after b was refused, want [a]", got)
	}
}

func TestStreamLocalChecks(t *testing.T) {
	f := newFakeServer(t)
	c := f.client(t)
	if _, err := c.Stream(context.Background(), []string{"a b"}); err == nil {
		t.Fatal("Stream took an invalid id")
	}
	many := make([]string, MaxStreamMarkets+1)
	for i := range many {
		many[i] = fmt.Sprintf("m%d", i)
	}
	if _, err := c.Stream(context.Background(), many); err == nil {
		t.Fatal("Stream took 501 markets")
	}
	s, err := c.Stream(context.Background(), many[:MaxStreamMarkets])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() //nolint:errcheck // Close returns nil
	if err := s.Subscribe(many[MaxStreamMarkets]); err == nil {
		t.Fatal("Subscribe took a 501st market")
	}
	if err := s.Subscribe("a/b"); err == nil {
		t.Fatal("Subscribe took an invalid id")
	}
	// The 500 ids go in one subscribe, whose ack is well over the
	// library's default read limit of 32 KiB.
	conn := f.next(t)
	_, ids := conn.cmd()
	if len(ids) != MaxStreamMarkets {
		t.Fatalf("subscribe of %d ids, want %d", len(ids), MaxStreamMarkets)
	}
	conn.ack(ids)
	expectKind(t, s, StreamConnected)
	if ev := expectKind(t, s, StreamSubscribed); len(ev.MarketIDs) != MaxStreamMarkets {
		t.Fatalf("ack of %d ids", len(ev.MarketIDs))
	}
}

func TestStreamCancelClosesNormally(t *testing.T) {
	f := newFakeServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := f.client(t).Stream(ctx, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	c := f.next(t)
	c.cmd()
	cancel()
	select {
	case code := <-c.closed:
		if code != websocket.StatusNormalClosure {
			t.Fatalf("the server saw close %d, want 1000", code)
		}
	case <-time.After(waitLong):
		t.Fatal("the client did not close")
	}
	<-s.Done()
	if _, err := s.Next(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v, want context.Canceled", err)
	}

	// Close: the same, and ErrStreamClosed.
	s = f.open(t, "a")
	c = f.next(t)
	c.cmd()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if code := <-c.closed; code != websocket.StatusNormalClosure {
		t.Fatalf("the server saw close %d after Close, want 1000", code)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("Next after Close: %v, want ErrStreamClosed", err)
	}
	if err := s.Subscribe("b"); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("Subscribe after Close: %v, want ErrStreamClosed", err)
	}
}

func TestStreamClosedDrains(t *testing.T) {
	f := newFakeServer(t)
	s := f.open(t, "a")
	c := f.next(t)
	_, ids := c.cmd()
	c.ack(ids)
	c.price("a", 1)
	c.ws.Close(CloseKeyRevoked, "the API key was revoked") //nolint:errcheck // the client's end shows
	<-s.Done()
	// What came before the close is handed out, then the typed error.
	expectKind(t, s, StreamConnected)
	expectKind(t, s, StreamSubscribed)
	expectKind(t, s, StreamPrice)
	_, err := s.Next(context.Background())
	var ce *StreamClosedError
	if !errors.As(err, &ce) || ce.Code != CloseKeyRevoked || ce.Reason != "the API key was revoked" {
		t.Fatalf("Next at the end: %v, want the 4401 *StreamClosedError", err)
	}
}

func TestStreamSilentConnectionReconnects(t *testing.T) {
	defer streamSilence.Store(streamSilence.Load())
	streamSilence.Store(int64(300 * time.Millisecond))
	f := newFakeServer(t)
	s := f.open(t, "a")
	defer s.Close() //nolint:errcheck // Close returns nil
	// The server answers nothing and never pings: the connection is
	// taken for dead and replaced.
	f.next(t).cmd()
	expectKind(t, s, StreamConnected)
	if ev := expectKind(t, s, StreamDisconnected); !errors.Is(ev.Err, errStreamSilent) {
		t.Fatalf("disconnected by %v, want errStreamSilent", ev.Err)
	}
	c := f.next(t)
	if op, ids := c.cmd(); op != "subscribe" || !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("command after the reconnect: %s %v", op, ids)
	}
}

func TestStreamPingsKeepConnectionAlive(t *testing.T) {
	defer streamSilence.Store(streamSilence.Load())
	// The silence allowed is wide (3 s against pings every 50 ms), so that
	// a stall of the test's goroutines on a loaded machine cannot look like
	// a silent connection; the pings go on for more than twice that.
	const silence = 3 * time.Second
	streamSilence.Store(int64(silence))
	f := newFakeServer(t)
	s := f.open(t, "a")
	defer s.Close() //nolint:errcheck // Close returns nil
	c := f.next(t)
	c.cmd()
	// Pings for more than twice the silence allowed, then nothing: the
	// connection is dropped only after the pings stop (a ping on a
	// connection the client dropped fails).
	var lastPing time.Time
	for end := time.Now().Add(7 * time.Second); time.Now().Before(end); {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.ws.Ping(ctx); err != nil {
			cancel()
			t.Fatalf("ping: %v", err)
		}
		cancel()
		lastPing = time.Now()
		time.Sleep(50 * time.Millisecond) // the server's ping interval
	}
	expectKind(t, s, StreamConnected)
	ev := expectKind(t, s, StreamDisconnected)
	if !errors.Is(ev.Err, errStreamSilent) {
		t.Fatalf("disconnected by %v, want errStreamSilent", ev.Err)
	}
	select {
	case code := <-c.closed:
		t.Logf("the fake server saw the connection end (%d) after the pings stopped at %s", code, lastPing.Format("15:04:05.000"))
	case <-time.After(waitLong):
		t.Fatal("the silent connection was not dropped")
	}
}

// TestStreamUpgradeRetryAfter: the upgrade's Retry-After is read like a
// REST answer's (parseRetryAfter): a huge number of seconds is capped, not
// wrapped into a negative wait that retries at once, and an HTTP date
// counts. Both ask for longer than WithMaxRetryAfter: one upgrade, the
// *Error returned with the wait.
func TestStreamUpgradeRetryAfter(t *testing.T) {
	for _, c := range []struct {
		name       string
		retryAfter string
		min, max   time.Duration
	}{
		{"seconds that overflow a Duration", "99999999999", maxRetryAfterSeconds * time.Second, maxRetryAfterSeconds * time.Second},
		{"an HTTP date", time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat), 100 * time.Second, 121 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t)
			refuse := refuseWith(http.StatusTooManyRequests, c.retryAfter, "rate_limited")
			f.refuse = []func(http.ResponseWriter){refuse, refuse, refuse, refuse, refuse}
			_, err := f.client(t).Stream(context.Background(), []string{"a"})
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.RetryAfter < c.min || e.RetryAfter > c.max {
				t.Fatalf("Stream refused with Retry-After %q: %v (%+v), want the 429 with RetryAfter in [%v, %v]", c.retryAfter, err, e, c.min, c.max)
			}
			if n := f.upgrades(); n != 1 {
				t.Fatalf("%d upgrades, want 1 (a wait over WithMaxRetryAfter is not retried)", n)
			}
		})
	}
}

// TestStreamEventsBoundedAcrossReconnects: a consumer that stopped
// reading, and a server that accepts, answers the subscribe and closes, 60
// times over: what waits does not grow with the reconnects. The cycles
// (connected, resubscribed, disconnected) after the first reconnect fold
// into one: its events say how many they stand for (Merged), the
// resubscribe ack kept is the latest, with every market any folded ack
// listed as missing.
func TestStreamEventsBoundedAcrossReconnects(t *testing.T) {
	f := newFakeServer(t)
	s := f.open(t, "a", "b")
	defer s.Close() //nolint:errcheck // Close returns nil
	const cycles = 60
	for i := range cycles {
		c := f.next(t)
		_, ids := c.cmd()
		if i == 7 {
			c.send("subscribed", `,"market_ids":["a"],"missing":["b"]`)
		} else {
			c.ack(ids)
		}
		c.price("a", int64(i+1))
		c.ws.Close(websocket.StatusGoingAway, "node shutting down") //nolint:errcheck // the client's end shows
	}
	last := f.next(t)
	_, ids := last.cmd()
	if !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("last resubscribe of %v, want [a] (b was missing)", ids)
	}
	last.ack(ids)
	// Wait until the last ack waits for the consumer, then take everything.
	var evs []StreamEvent
	for deadline := time.Now().Add(waitLong); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		n := len(s.q.entries)
		done := n > 0 && s.q.entries[n-1].ev.Kind == StreamSubscribed && slices.Equal(s.q.entries[n-1].ev.MarketIDs, ids)
		if done {
			evs = drain(s.q)
		}
		s.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the last resubscribe's ack never came")
		}
	}
	t.Logf("%d events for %d reconnects: %v", len(evs), cycles, versions(evs))
	want := []string{"connected", "subscribed", "a@60", "disconnected", "connected", "subscribed", "disconnected", "connected", "subscribed"}
	if !eq(versions(evs), want) {
		t.Fatalf("%d events waited after %d reconnects: %v, want %v", len(evs), cycles, versions(evs), want)
	}
	if evs[4].Merged != cycles-2 {
		t.Fatalf("the reconnect cycle kept stands for %d others, want %d", evs[4].Merged, cycles-2)
	}
	var connects, disconnects, resubs int
	missingB := false
	for _, ev := range evs {
		switch ev.Kind {
		case StreamConnected:
			connects += 1 + ev.Merged
		case StreamDisconnected:
			disconnects += 1 + ev.Merged
		case StreamSubscribed:
			if ev.Resubscribe {
				resubs += 1 + ev.Merged
			}
			missingB = missingB || slices.Contains(ev.Missing, "b")
		case StreamPrice:
			if ev.Price.Version != cycles {
				t.Fatalf("price %s@%d, want only the newest, a@%d", ev.Price.MarketID, ev.Price.Version, cycles)
			}
		}
	}
	if connects != cycles+1 || disconnects != cycles || resubs != cycles {
		t.Fatalf("counted %d connects, %d disconnects, %d resubscribes (with Merged), want %d, %d, %d",
			connects, disconnects, resubs, cycles+1, cycles, cycles)
	}
	if !missingB {
		t.Fatal("no ack the consumer got lists b as missing")
	}
	if got := s.Markets(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Markets() = %v, want [a]", got)
	}
}

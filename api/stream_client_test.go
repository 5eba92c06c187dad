package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// The stream tests' client side and fixture: a world with markets s000…
// under one served event, and a WebSocket client that checks what every
// client relies on for every message it reads (an object with type and
// seq, seq 1, 2, 3, … without a gap).

// wsClient is one stream. Its socket is read by a goroutine of its own,
// started by the first next, that hands each message over unbuffered: the
// client takes nothing more from the socket while the test does not ask
// for the next message (a slow or stalled client), and a wait for a
// message can time out without breaking the connection.
type wsClient struct {
	t       testing.TB
	c       *websocket.Conn
	seq     int64
	name    string
	started bool
	msgs    chan wsRead
	// err ended the reads.
	err error
}

// wsRead is one read of the socket.
type wsRead struct {
	typ  int
	data []byte
	err  error
}

// errNoMessage is next's timeout.
var errNoMessage = errors.New("no message in time")

// streamMsg is one server message.
type streamMsg struct {
	Type      string   `json:"type"`
	Seq       int64    `json:"seq"`
	MarketIDs []string `json:"market_ids"`
	Missing   []string `json:"missing"`
	Code      string   `json:"code"`
	Message   string   `json:"message"`
	MarketID  string   `json:"market_id"`
	Version   int64    `json:"version"`
	raw       []byte
}

// dialOpts shape a dial.
type dialOpts struct {
	// rcvbuf, if set, is the client socket's receive buffer: small, so a
	// client that stops reading stops taking soon.
	rcvbuf int
	header http.Header
}

// dialStream opens a stream on n with secret; a refused upgrade returns
// the HTTP answer and an error.
func (n *node) dialStream(t testing.TB, secret string, o dialOpts) (*wsClient, answer, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	if o.rcvbuf > 0 {
		nd := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, o.rcvbuf)
			})
			return errors.Join(err, serr)
		}}
		d.NetDialContext = nd.DialContext
	}
	h := http.Header{}
	for k, v := range o.header {
		h[k] = v
	}
	if secret != "" {
		h.Set("Authorization", "Bearer "+secret)
	}
	url := "ws" + strings.TrimPrefix(n.base, "http") + "/public/v1/stream"
	c, resp, err := d.Dial(url, h)
	var a answer
	if resp != nil {
		a.status, a.header = resp.StatusCode, resp.Header
		if resp.Body != nil {
			var buf [4096]byte
			k, _ := resp.Body.Read(buf[:])
			a.body = append([]byte(nil), buf[:k]...)
			resp.Body.Close()
		}
	}
	if err != nil {
		return nil, a, err
	}
	ws := &wsClient{t: t, c: c, name: n.base, msgs: make(chan wsRead)}
	t.Cleanup(func() { c.Close() }) //nolint:errcheck // closed already, perhaps
	return ws, a, nil
}

// mustDial is dialStream that must succeed.
func (n *node) mustDial(t testing.TB, secret string) *wsClient {
	t.Helper()
	ws, a, err := n.dialStream(t, secret, dialOpts{})
	if err != nil {
		t.Fatalf("dial stream on %s: %v (status %d %s)", n.base, err, a.status, a.body)
	}
	return ws
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := c.c.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send %s: %v", b, err)
	}
}

func (c *wsClient) subscribe(ids ...string) {
	c.t.Helper()
	c.send(map[string]any{"op": "subscribe", "market_ids": ids})
}

// next reads the next message within d, checking its seq.
func (c *wsClient) next(d time.Duration) (streamMsg, error) {
	c.t.Helper()
	if !c.started {
		c.started = true
		go func() {
			for {
				typ, data, err := c.c.ReadMessage()
				c.msgs <- wsRead{typ, data, err}
				if err != nil {
					return
				}
			}
		}()
	}
	if c.err != nil {
		return streamMsg{}, c.err
	}
	var r wsRead
	select {
	case r = <-c.msgs:
	case <-time.After(d):
		return streamMsg{}, errNoMessage
	}
	if r.err != nil {
		c.err = r.err // every later read ends the same way
		return streamMsg{}, r.err
	}
	typ, data := r.typ, r.data
	if typ != websocket.TextMessage {
		c.t.Fatalf("message of type %d, want text", typ)
	}
	var m streamMsg
	if err := json.Unmarshal(data, &m); err != nil {
		c.t.Fatalf("message %s is not a JSON object: %v", data, err)
	}
	m.raw = data
	if m.Type == "" || m.Seq != c.seq+1 {
		c.t.Fatalf("message %s: want a type and seq %d (the one after the last)", data, c.seq+1)
	}
	c.seq = m.Seq
	return m, nil
}

// must reads the next message, which must come within 5 s.
func (c *wsClient) must() streamMsg {
	c.t.Helper()
	m, err := c.next(5 * time.Second)
	if err != nil {
		c.t.Fatalf("stream on %s: no message within 5s: %v", c.name, err)
	}
	return m
}

// expect reads the next message and checks its type.
func (c *wsClient) expect(typ string) streamMsg {
	c.t.Helper()
	m := c.must()
	if m.Type != typ {
		c.t.Fatalf("got %s, want a %q message", m.raw, typ)
	}
	return m
}

// quiet checks that no message comes within d.
func (c *wsClient) quiet(d time.Duration) {
	c.t.Helper()
	if m, err := c.next(d); err == nil {
		c.t.Fatalf("unexpected message %s", m.raw)
	} else if !errors.Is(err, errNoMessage) {
		c.t.Fatalf("stream ended: %v", err)
	}
}

// closed reads until the stream ends and returns its close code and how
// long that took; messages before it are passed to seen (may be nil).
func (c *wsClient) closed(within time.Duration, seen func(streamMsg)) (int, time.Duration) {
	c.t.Helper()
	start := time.Now()
	for {
		m, err := c.next(time.Until(start.Add(within)))
		if err == nil {
			if seen != nil {
				seen(m)
			}
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, time.Since(start)
		}
		c.t.Fatalf("stream on %s did not close within %s: %v", c.name, within, err)
	}
}

// streamSecret is a key of a fresh account with access and the scopes the
// stream tests need.
func streamSecret(t testing.TB, w *world) (string, *store.Key) {
	t.Helper()
	return w.newKey(t, keyOpts{scopes: []string{store.ScopeMarketsRead, store.ScopeStreamRead}})
}

// streamMarket is the i-th fixture market's id.
func streamMarket(i int) string { return fmt.Sprintf("s%03d", i) }

// streamFixture publishes one served event with n markets, each with price
// version 1, and waits until ingest applied them.
func streamFixture(t testing.TB, w *world, n int) {
	t.Helper()
	w.publish(t, "event", "E-s", map[string]any{"universal_id": "E-s", "version": 1, "title": "Stream event",
		"category": "politics", "status": "active", "merged_into": nil, "venue_a_event_ticker": "va-E-s",
		"venue_b_event_slug": "vb-E-s", "venue_c_event_id": nil, "venue_d_event_id": nil, "volume": 1.0,
		"updated_at": "2024-05-10T09:00:00Z"})
	for i := range n {
		id := streamMarket(i)
		w.publish(t, "market", id, map[string]any{"universal_id": id, "event_id": "E-s", "version": 1,
			"title": "Market " + id, "status": "active", "venues": map[string]string{"venue_a": "a-" + id},
			"resolved_at": nil, "result": nil, "updated_at": "2024-05-10T09:00:00Z"})
		streamPrice(t, w, id, 1)
	}
	w.applied(t)
	w.noRejects(t)
}

// streamPrice publishes version v of a market's price (its bid encodes v).
func streamPrice(t testing.TB, w *world, id string, v int) {
	t.Helper()
	bid, vol := float64(v%1000)/1000, float64(v)
	w.publish(t, "price", id, map[string]any{"market_id": id, "version": v,
		"ts":     time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
		"quotes": map[string]ingest.QuoteMsg{"venue_a": {Bid: &bid, Volume24h: &vol}}})
}

// streamWorld is a world with ingest, n markets and nodes; the secret has
// stream:read.
func streamWorld(t *testing.T, markets, nodes int, opts ...option) (*world, []*node, string, *store.Key) {
	t.Helper()
	w := newWorld(t, withIngest())
	var ns []*node
	for range nodes {
		ns = append(ns, w.node(t, opts...))
	}
	streamFixture(t, w, markets)
	secret, k := streamSecret(t, w)
	return w, ns, secret, k
}

// untilPrice reads until the price of id at version v arrives, passing
// every message to seen; it fails after 5 s.
func (c *wsClient) untilPrice(id string, v int64, seen func(streamMsg)) {
	c.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, err := c.next(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("stream on %s: no price of %s version %d within 5s: %v", c.name, id, v, err)
		}
		if seen != nil {
			seen(m)
		}
		if m.Type == "price" && m.MarketID == id && m.Version >= v {
			if m.Version != v {
				c.t.Fatalf("price of %s: version %d, want %d", id, m.Version, v)
			}
			return
		}
	}
}

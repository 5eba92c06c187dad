package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// streamClient is one WebSocket price stream on an API node. A goroutine of
// its own reads it from the dial on, as a client that keeps up does, and
// checks for every message what a client relies on (contract §3 "Streams"):
// a JSON object with type and seq, seq 1, 2, 3, … without a gap, a price
// only for a market whose subscribe was acknowledged, and a market's
// versions never going back. It keeps each market's newest version.
type streamClient struct {
	name string
	ws   *websocket.Conn
	// ctrl are the acks and errors, in order.
	ctrl chan streamMsg
	done chan struct{}

	mu         sync.Mutex
	seq        int64
	subscribed map[string]bool
	versions   map[string]int64
	// fields are each market's newest price without type and seq.
	fields map[string]string
	prices int
	// repeats counts prices of a version the client had already (the
	// same fields: a repeat that differs is a problem).
	repeats  int
	problems []string
	// ended is how the reading ended (nil while it goes on).
	ended error
}

// streamMsg is one server message (the fields the tests read).
type streamMsg struct {
	Type      string   `json:"type"`
	Seq       int64    `json:"seq"`
	MarketIDs []string `json:"market_ids"`
	Missing   []string `json:"missing"`
	Code      string   `json:"code"`
	Message   string   `json:"message"`
	MarketID  string   `json:"market_id"`
	Version   int64    `json:"version"`
}

// dialStream opens a stream on node with secret. A refused upgrade returns
// its HTTP answer and an error.
func dialStream(ctx context.Context, node *child, name, secret string) (*streamClient, answer, error) {
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	h := http.Header{"Authorization": {"Bearer " + secret}}
	ws, resp, err := d.DialContext(ctx, "ws://"+node.http+"/public/v1/stream", h)
	var a answer
	if resp != nil {
		a.status, a.header = resp.StatusCode, resp.Header
		if resp.Body != nil {
			var buf [4096]byte
			n, _ := resp.Body.Read(buf[:])
			a.body = string(buf[:n])
			resp.Body.Close()
		}
	}
	if err != nil {
		return nil, a, fmt.Errorf("dial stream %s on %s: %w", name, node.name, err)
	}
	c := &streamClient{name: name, ws: ws, ctrl: make(chan streamMsg, 64), done: make(chan struct{}),
		subscribed: map[string]bool{}, versions: map[string]int64{}, fields: map[string]string{}}
	go c.read()
	return c, a, nil
}

// read is the client's reader: it answers pings (the library's default
// handler does, inside ReadMessage) and checks every message.
func (c *streamClient) read() {
	defer close(c.done)
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			c.ended = err
			c.mu.Unlock()
			return
		}
		var m streamMsg
		c.mu.Lock()
		if err := json.Unmarshal(data, &m); typ != websocket.TextMessage || err != nil {
			c.problem("message of type %d %.200s: want a JSON object in a text message (%v)", typ, data, err)
			c.mu.Unlock()
			continue
		}
		if m.Type == "" || m.Seq != c.seq+1 {
			c.problem("message %.200s: want a type and seq %d, the one after the last", data, c.seq+1)
		}
		c.seq = m.Seq
		switch m.Type {
		case "price":
			last := c.versions[m.MarketID]
			switch {
			case !c.subscribed[m.MarketID]:
				c.problem("price of %s, which no acknowledged subscribe names: %.200s", m.MarketID, data)
			case m.Version < last:
				c.problem("price of %s at version %d after version %d", m.MarketID, m.Version, last)
			case m.Version == last:
				c.repeats++
				if f := priceFields(data); f != c.fields[m.MarketID] {
					c.problem("price of %s at version %d again with other fields: %s after %s", m.MarketID, m.Version, f, c.fields[m.MarketID])
				}
			default:
				c.versions[m.MarketID] = m.Version
				c.fields[m.MarketID] = priceFields(data)
			}
			c.prices++
		case "subscribed":
			for _, id := range m.MarketIDs {
				c.subscribed[id] = true
			}
		case "unsubscribed":
			for _, id := range m.MarketIDs {
				delete(c.subscribed, id)
			}
		}
		c.mu.Unlock()
		if m.Type != "price" {
			select {
			case c.ctrl <- m:
			default:
				c.mu.Lock()
				c.problem("%s message %.200s not taken by the test", m.Type, data)
				c.mu.Unlock()
			}
		}
	}
}

// priceFields is a price message after its type and seq.
func priceFields(data []byte) string {
	s := string(data)
	if i := strings.Index(s, `"seq":`); i >= 0 {
		if j := strings.IndexByte(s[i:], ','); j >= 0 {
			return s[i+j+1:]
		}
	}
	return s
}

// problem records what the client saw wrong; c.mu is held.
func (c *streamClient) problem(format string, args ...any) {
	if len(c.problems) < 10 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// subscribe subscribes to ids, which must all be accepted, and waits for
// the snapshot on subscribe: a price of every one of them, at least at the
// version want names (nil: any).
func (c *streamClient) subscribe(t *testing.T, ids []string, want map[string]int64) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"op": "subscribe", "market_ids": ids})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatalf("%s: send subscribe: %v", c.name, err)
	}
	select {
	case m := <-c.ctrl:
		if m.Type != "subscribed" || !slices.Equal(m.MarketIDs, ids) || len(m.Missing) != 0 {
			t.Fatalf("%s: subscribe to %v answered %+v; want subscribed with every id and none missing", c.name, ids, m)
		}
	case <-c.done:
		t.Fatalf("%s: stream ended before its subscribe was acknowledged: %v", c.name, c.err())
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: subscribe not acknowledged within 5 s", c.name)
	}
	if want == nil {
		want = map[string]int64{}
		for _, id := range ids {
			want[id] = 1
		}
	}
	if err := c.waitVersions(want, time.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("snapshot on subscribe: %v", err)
	}
}

// waitVersions waits until the client has, for every market of want, at
// least that version.
func (c *streamClient) waitVersions(want map[string]int64, deadline time.Time) error {
	for {
		c.mu.Lock()
		behind := ""
		for id, v := range want {
			if got := c.versions[id]; got < v {
				behind = fmt.Sprintf("market %s at version %d, want %d", id, got, v)
				break
			}
		}
		ended := c.ended
		c.mu.Unlock()
		switch {
		case behind == "":
			return nil
		case ended != nil:
			return fmt.Errorf("%s ended (%v) with %s", c.name, ended, behind)
		case time.Now().After(deadline):
			return fmt.Errorf("%s: %s", c.name, behind)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// version is the newest version of market the client has.
func (c *streamClient) version(market string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.versions[market]
}

func (c *streamClient) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// close ends the stream as a client does (a close frame, then the
// connection) and waits for the reader.
func (c *streamClient) close() {
	c.ws.WriteControl(websocket.CloseMessage, //nolint:errcheck // the connection is closed next either way
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.ws.Close() //nolint:errcheck // done with it
	<-c.done
}

// check fails the test with what the client saw wrong, and with its end
// when the stream ended (no stream of these tests is closed by the node).
func (c *streamClient) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.problems {
		t.Errorf("%s: %s", c.name, p)
	}
	if c.ended != nil {
		t.Errorf("%s ended while the test needed it open: %v", c.name, c.ended)
	}
}

// openStreams opens n streams with secret, spread over nodes, each
// subscribed to markets with their snapshot at want's versions.
func openStreams(t *testing.T, nodes []*child, secret string, n int, markets []string, want map[string]int64) []*streamClient {
	t.Helper()
	var streams []*streamClient
	for i := range n {
		node := nodes[i%len(nodes)]
		c, a, err := dialStream(context.Background(), node, fmt.Sprintf("stream %d on %s", i+1, node.name), secret)
		if err != nil {
			t.Fatalf("%v: %d %s", err, a.status, a.body)
		}
		t.Cleanup(c.close)
		c.subscribe(t, markets, want)
		streams = append(streams, c)
	}
	return streams
}

// refusedStream checks that an upgrade with secret is refused on every
// node as the account's stream over the limit: 429 rate_limited with
// Retry-After in whole seconds.
func refusedStream(t *testing.T, nodes []*child, secret, what string) {
	t.Helper()
	for _, n := range nodes {
		c, a, err := dialStream(context.Background(), n, what, secret)
		if err == nil {
			c.close()
			t.Errorf("%s on %s: upgraded; want 429 rate_limited", what, n.name)
			continue
		}
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if jerr := json.Unmarshal([]byte(a.body), &body); jerr != nil || a.status != http.StatusTooManyRequests ||
			body.Error.Code != "rate_limited" || body.Error.Message == "" {
			t.Errorf("%s on %s: %v, status %d body %q; want 429 with code rate_limited and a message", what, n.name, err, a.status, a.body)
			continue
		}
		var secs int
		if ra := a.header.Get("Retry-After"); ra == "" || strings.TrimLeft(ra, "0123456789") != "" {
			t.Errorf("%s on %s: 429 with Retry-After %q, want whole seconds", what, n.name, ra)
		} else if _, err := fmt.Sscan(ra, &secs); err != nil || secs < 1 {
			t.Errorf("%s on %s: Retry-After %q, want at least 1 second", what, n.name, ra)
		}
	}
}

// waitAll waits until every stream has want's versions.
func waitAll(streams []*streamClient, want map[string]int64, deadline time.Time) error {
	var errs []error
	for _, c := range streams {
		if err := c.waitVersions(want, deadline); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// received sums the price messages the streams took and those of a version
// they had already.
func received(streams []*streamClient) (prices, repeats int) {
	for _, c := range streams {
		c.mu.Lock()
		prices += c.prices
		repeats += c.repeats
		c.mu.Unlock()
	}
	return prices, repeats
}

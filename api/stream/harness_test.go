package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
)

// The hub's tests run a Hub behind a net/http server on a loopback port,
// with real WebSocket clients, and a price source in memory that records
// every read: what the fan-out reads, and what it does not, is the point.

// fakePrices is a Prices source: each market's current item, and the ids
// every read asked for.
type fakePrices struct {
	mu    sync.Mutex
	items map[string]cache.PriceItem
	calls [][]string
}

func newFakePrices() *fakePrices { return &fakePrices{items: map[string]cache.PriceItem{}} }

// set makes version v the current item of id (its Rev is v too).
func (f *fakePrices) set(id string, v int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items[id] = cache.PriceItem{Found: true, Served: true, Rev: v, Body: priceBody(id, v)}
}

func (f *fakePrices) Prices(_ context.Context, ids []string) ([]cache.PriceItem, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, slices.Clone(ids))
	out := make([]cache.PriceItem, len(ids))
	for i, id := range ids {
		out[i] = f.items[id]
	}
	return out, nil
}

// readIDs returns the ids read since the last call, and forgets them.
func (f *fakePrices) readIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, c := range f.calls {
		ids = append(ids, c...)
	}
	f.calls = nil
	slices.Sort(ids)
	return ids
}

// priceBody is a price item's wire bytes (only its version matters here).
func priceBody(id string, v int64) []byte {
	return fmt.Appendf(nil, `{"market_id":%q,"version":%d,"pad":"%s"}`, id, v, strings.Repeat("x", 200))
}

// carried is a notice that carries versions v of ids.
func carried(v int64, ids ...string) notice.Change {
	n := notice.Change{Markets: ids}
	for _, id := range ids {
		n.Prices = append(n.Prices, notice.Price{ID: id, Rev: v, Served: true, Body: priceBody(id, v)})
	}
	return n
}

// countingConn counts the writes to a server connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

// testHub is a running Hub behind a WebSocket server.
type testHub struct {
	*Hub
	url string
	// writes counts the server's writes to its connections (the upgrade's
	// answer included).
	writes atomic.Int64
}

// quietConfig is the defaults with no resync of its own and no ping
// during a test: only what a test does makes the hub read or write.
func quietConfig() Config {
	cfg := DefaultConfig()
	cfg.Resync, cfg.PingEvery, cfg.PongWait = time.Hour, time.Hour, 2*time.Hour
	return cfg
}

func startHub(t testing.TB, src Prices, cfg Config) *testHub {
	t.Helper()
	return startHubWith(t, src, cfg, nil)
}

// startHubWith starts a hub whose connections write through the Output
// out makes of each (its socket, past the write counting), as the api
// package gives one on Linux.
func startHubWith(t testing.TB, src Prices, cfg Config, out func(net.Conn) Output) *testHub {
	t.Helper()
	h, err := New(src, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	th := &testHub{Hub: h}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	up := websocket.Upgrader{ReadBufferSize: 512, WriteBufferPool: &sync.Pool{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close() //nolint:errcheck // as the api package closes a stream's connection
		c, err := h.Add(ws, Info{ID: "test"}, nil)
		if err != nil {
			return
		}
		if out != nil {
			c.SetOutput(out(ws.NetConn().(countingConn).Conn))
		}
		c.Serve(ctx)
	}))
	srv.Listener = countingListener{srv.Listener, &th.writes}
	srv.Start()
	th.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		// A connection whose writer never stops (its writerDone never
		// done) holds Shutdown until the deadline: that is a failure.
		if err := h.Shutdown(sctx); err != nil {
			t.Errorf("hub shutdown: %v (%d streams still open)", err, h.Open())
		}
		cancel()
		<-done
		srv.Close()
	})
	return th
}

// client is a test's stream: it checks seq on every message.
type client struct {
	t   *testing.T
	ws  *websocket.Conn
	seq int64
}

// msg is one server message.
type msg struct {
	Type      string   `json:"type"`
	Seq       int64    `json:"seq"`
	MarketIDs []string `json:"market_ids"`
	Missing   []string `json:"missing"`
	MarketID  string   `json:"market_id"`
	Version   int64    `json:"version"`
}

func (th *testHub) dial(t *testing.T) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(th.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() }) //nolint:errcheck // the test is over
	return &client{t: t, ws: ws}
}

func (c *client) subscribe(ids ...string) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"op": "subscribe", "market_ids": ids})
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatal(err)
	}
}

// next reads one message (within 5 s) and checks its seq.
func (c *client) next() msg {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck // the read reports it
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var m msg
	if err := json.Unmarshal(data, &m); err != nil {
		c.t.Fatalf("message %s: %v", data, err)
	}
	if m.Seq != c.seq+1 {
		c.t.Fatalf("seq %d after %d: %s", m.Seq, c.seq, data)
	}
	c.seq = m.Seq
	return m
}

// subscribed subscribes to ids and reads the ack and one snapshot price
// each; it returns the snapshot's versions.
func (c *client) subscribed(ids ...string) map[string]int64 {
	c.t.Helper()
	c.subscribe(ids...)
	if m := c.next(); m.Type != "subscribed" || len(m.MarketIDs) != len(ids) {
		c.t.Fatalf("ack %+v, want %d markets subscribed", m, len(ids))
	}
	got := map[string]int64{}
	for range ids {
		m := c.next()
		if m.Type != "price" {
			c.t.Fatalf("%+v, want a price", m)
		}
		got[m.MarketID] = m.Version
	}
	return got
}

// quiet fails if a message comes within d.
func (c *client) quiet(d time.Duration) {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(d)) //nolint:errcheck // the read reports it
	if _, data, err := c.ws.ReadMessage(); err == nil {
		c.t.Fatalf("unexpected message %s", data)
	}
}

func marketIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%03d", i)
	}
	return ids
}

// counterValue reads a counter of the hub's metrics.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// seeded is a price source holding n markets (marketIDs) at version 1.
func seeded(n int) (*fakePrices, []string) {
	src, ids := newFakePrices(), marketIDs(n)
	for _, id := range ids {
		src.set(id, 1)
	}
	return src, ids
}

// pricesAt reads n messages, each a price of version v, and returns their
// markets, sorted.
func (c *client) pricesAt(v int64, n int) []string {
	c.t.Helper()
	seen := make([]string, 0, n)
	for range n {
		m := c.next()
		if m.Type != "price" || m.Version != v {
			c.t.Fatalf("%+v, want a price of version %d", m, v)
		}
		seen = append(seen, m.MarketID)
	}
	slices.Sort(seen)
	return seen
}

// idleWriters waits (5 s at most) until no connection of the hub has a
// writer: the goroutine that wrote a subscribe's ack and snapshot may
// still hold the connection's writer role after the client read them,
// and a notice meanwhile is then its to write, not a fan-out worker's.
func (th *testHub) idleWriters(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		busy := 0
		th.Each(func(c *Conn) {
			c.mu.Lock()
			if c.writing {
				busy++
			}
			c.mu.Unlock()
		})
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still have a writer after 5 s", busy)
		}
	}
}

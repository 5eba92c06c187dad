package stream

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"golang.org/x/sys/unix"

	"github.com/marketdata/marketdata/internal/notice"
)

// testOutput is an Output over a connection's socket: with chop, a third
// of its writes take only part of what they are given, cut at any byte
// (none at all included), as a socket that fills mid-frame does.
type testOutput struct {
	nc   net.Conn
	chop bool
	// gate, when set, holds the next write until it is closed.
	gate  atomic.Pointer[chan struct{}]
	mu    sync.Mutex
	rnd   *rand.Rand
	calls atomic.Int64
	short atomic.Int64
}

func (o *testOutput) TryWrite(b []byte) (int, error) {
	o.calls.Add(1)
	if g := o.gate.Swap(nil); g != nil {
		<-*g
	}
	n := len(b)
	if o.chop {
		o.mu.Lock()
		if o.rnd.IntN(3) == 0 {
			n = o.rnd.IntN(len(b))
		}
		o.mu.Unlock()
	}
	if n < len(b) {
		o.short.Add(1)
	}
	if n == 0 {
		return 0, nil
	}
	return o.nc.Write(b[:n])
}

// outputs makes the testOutputs of a hub's connections and keeps them.
type outputs struct {
	chop bool
	mu   sync.Mutex
	all  []*testOutput
}

func (os *outputs) make(nc net.Conn) Output {
	os.mu.Lock()
	defer os.mu.Unlock()
	o := &testOutput{nc: nc, chop: os.chop, rnd: rand.New(rand.NewPCG(uint64(len(os.all)), 7))}
	os.all = append(os.all, o)
	return o
}

func (os *outputs) sum() (calls, short int64) {
	os.mu.Lock()
	defer os.mu.Unlock()
	for _, o := range os.all {
		calls += o.calls.Load()
		short += o.short.Load()
	}
	return calls, short
}

// A notice's prices reach a client that keeps up through the fan-out
// worker's own writes (writeNow): no write of the writer goroutine's.
func TestFanOutWritesOnTheWorker(t *testing.T) {
	src, ids := seeded(40)
	outs := &outputs{}
	h := startHubWith(t, src, quietConfig(), outs.make)
	c := h.dial(t)
	c.subscribed(ids...) // the ack and snapshot: the writer goroutine's
	h.idleWriters(t)
	before := h.writes.Load()
	for v := int64(2); v <= 30; v++ {
		h.OnChange(carried(v, ids[int(v)%20:int(v)%20+20]...))
		// One notice at a time, so that each is fanned out alone.
		if seen, want := c.pricesAt(v, 20), ids[int(v)%20:int(v)%20+20]; !slices.Equal(seen, want) {
			t.Fatalf("version %d of %v, want of %v", v, seen, want)
		}
	}
	calls, _ := outs.sum()
	if got := h.writes.Load() - before; got != 0 {
		t.Errorf("%d writes by the writer goroutine for a client that keeps up; want 0 (all by the fan-out worker)", got)
	}
	if calls == 0 {
		t.Fatal("no write through the connection's Output")
	}
	t.Logf("29 notices of 20 prices in %d writes by the fan-out worker", calls)
}

// A write that leaves a frame half written hands the rest to the writer
// goroutine, which writes it before anything else: whatever byte the
// socket fills at, the client reads whole frames, in seq order (next
// checks), every market's versions increasing up to its last, and the
// pongs to its pings (which the writer frames too) whole between them.
func TestFanOutShortWritesKeepFramesWhole(t *testing.T) {
	src, ids := seeded(60)
	outs := &outputs{chop: true}
	h := startHubWith(t, src, quietConfig(), outs.make)
	c := h.dial(t)
	var pongs atomic.Int64
	c.ws.SetPongHandler(func(data string) error {
		if data != "are you there" {
			t.Errorf("pong %q, want the ping's payload", data)
		}
		pongs.Add(1)
		return nil
	})
	c.subscribed(ids...)

	const last = 300
	rnd := rand.New(rand.NewPCG(1, 2))
	final := map[string]int64{}
	var notices [][]string
	for v := int64(2); v <= last; v++ {
		n := slices.Clone(ids)
		rnd.Shuffle(len(n), func(i, j int) { n[i], n[j] = n[j], n[i] })
		n = n[:1+rnd.IntN(30)]
		notices = append(notices, n)
		for _, id := range n {
			final[id] = v
		}
	}
	go func() {
		for i, n := range notices {
			h.OnChange(carried(int64(i+2), n...))
			if i%10 == 0 {
				c.ws.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)) //nolint:errcheck // a failed ping fails the pong count
				time.Sleep(time.Millisecond)
			}
		}
	}()
	got := map[string]int64{}
	for !reached(got, final) {
		m := c.next()
		if m.Type != "price" {
			t.Fatalf("%+v, want a price", m)
		}
		if m.Version <= got[m.MarketID] {
			t.Fatalf("%s: version %d after %d", m.MarketID, m.Version, got[m.MarketID])
		}
		got[m.MarketID] = m.Version
	}
	// The pongs come within the next reads.
	c.ws.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)) //nolint:errcheck // as above
	c.quiet(200 * time.Millisecond)
	calls, short := outs.sum()
	t.Logf("%d writes by the fan-out worker, %d of them short; %d pongs", calls, short, pongs.Load())
	if short == 0 {
		t.Fatal("no short write: the test did not cut a frame")
	}
	if pongs.Load() == 0 {
		t.Error("no pong to 31 pings")
	}
}

func reached(got, final map[string]int64) bool {
	for id, v := range final {
		if got[id] < v {
			return false
		}
	}
	return true
}

// Notices that wait for a busy fan-out worker are handed out together
// before it writes again: a client gets each market's newest version
// once (conflated), not every notice's in turn.
func TestFanOutBacklogConflated(t *testing.T) {
	src, ids := seeded(20)
	cfg := quietConfig()
	cfg.Workers = 1
	outs := &outputs{}
	h := startHubWith(t, src, cfg, outs.make)
	c := h.dial(t)
	c.subscribed(ids...)
	h.idleWriters(t) // else the ack's writer goroutine may write the notice
	gate := make(chan struct{})
	outs.mu.Lock()
	outs.all[0].gate.Store(&gate)
	outs.mu.Unlock()
	h.OnChange(carried(2, ids...)) // its write waits at the gate
	for deadline := time.Now().Add(5 * time.Second); outs.all[0].gate.Load() != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(gate)
			t.Fatal("the notice's write did not reach the connection's Output within 5 s")
		}
	}
	for v := int64(3); v <= 20; v++ {
		h.OnChange(carried(v, ids...))
	}
	close(gate)
	for _, want := range []int64{2, 20} {
		if seen := c.pricesAt(want, len(ids)); !slices.Equal(seen, ids) {
			t.Fatalf("version %d of %v, want of every market once", want, seen)
		}
	}
	c.quiet(200 * time.Millisecond)
}

// The fan-out worker's writes move the write deadline as the writer
// goroutine's do: a deadline the goroutine set for its last write (the
// subscribe's ack) fails every write once it passes, which cut streams a
// while after they subscribed (StallAfter + StallGrace + 2 s: 32.5 s by
// default, 2.2 s here).
func TestFanOutWritesMoveTheDeadline(t *testing.T) {
	src, ids := seeded(5)
	cfg := quietConfig()
	cfg.StallAfter, cfg.StallGrace = 100*time.Millisecond, 100*time.Millisecond
	outs := &outputs{}
	h := startHubWith(t, src, cfg, outs.make)
	c := h.dial(t)
	c.subscribed(ids...)
	for v := int64(2); v <= 30; v++ {
		h.OnChange(carried(v, ids...))
		for range ids {
			if m := c.next(); m.Type != "price" || m.Version != v {
				t.Fatalf("%+v, want a price of version %d", m, v)
			}
		}
		time.Sleep(100 * time.Millisecond) // 2.9 s in all
	}
	if h.writes.Load() == 0 {
		t.Fatal("no write of the goroutine's: nothing set a deadline")
	}
}

// shortOutput takes at most room bytes a write, like a socket with little
// room left: every write of the fan-out worker hands over to the writer
// goroutine.
type shortOutput struct {
	nc   net.Conn
	room int
}

func (o *shortOutput) TryWrite(b []byte) (int, error) {
	return o.nc.Write(b[:min(len(b), o.room)])
}

// A client that reads slowly but steadily is never closed when the
// fan-out worker's write comes up short: the writer goroutine takes the
// rest of the batch one message a write, so StallAfter bounds one message,
// not the batch (as it did with one write of the whole rest: 500 prices of
// 2 KB, cut 1006 after 2.3 s).
func TestFanOutShortWriteSlowSteadyReaderKept(t *testing.T) {
	src, ids := seeded(500)
	cfg := quietConfig()
	cfg.Workers = 1
	cfg.StallAfter, cfg.StallGrace = 800*time.Millisecond, 300*time.Millisecond
	h := startHubWith(t, src, cfg, func(nc net.Conn) Output {
		raw, err := nc.(*net.TCPConn).SyscallConn()
		if err == nil {
			raw.Control(func(fd uintptr) { //nolint:errcheck // as the api package: best effort
				unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, 16<<10) //nolint:errcheck // as above
			})
		}
		return &shortOutput{nc: nc, room: 100}
	})
	d := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(256 << 10) //nolint:errcheck // a bigger buffer only makes it easier
		}
		return c, err
	}}
	ws, _, err := d.Dial(h.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close() //nolint:errcheck // the test is over
	c := &client{t: t, ws: ws}
	c.subscribed(ids...)
	n := notice.Change{Markets: ids}
	for _, id := range ids {
		n.Prices = append(n.Prices, notice.Price{ID: id, Rev: 2, Served: true,
			Body: fmt.Appendf(nil, `{"market_id":%q,"version":2,"pad":"%s"}`, id, strings.Repeat("y", 2000))})
	}
	h.OnChange(n)
	// One message each 5 ms: each waits far less than StallAfter/16, the
	// 500 take 2.5 s, three times StallAfter.
	for range ids {
		time.Sleep(5 * time.Millisecond)
		if m := c.next(); m.Type != "price" || m.Version != 2 {
			t.Fatalf("%+v, want a price of version 2", m)
		}
	}
}

// A client's close frame is answered with its code by the writer (the
// library's default handler, which wrote it itself, is replaced).
func TestClientCloseEchoed(t *testing.T) {
	src := newFakePrices()
	src.set("m000", 1)
	outs := &outputs{}
	h := startHubWith(t, src, quietConfig(), outs.make)
	c := h.dial(t)
	c.subscribed("m000")
	if err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "bye"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	c.ws.SetReadDeadline(time.Now().Add(2 * time.Second)) //nolint:errcheck // the read reports it
	_, _, err := c.ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4000 {
		t.Fatalf("read after the client's close: %v, want the close answered with 4000", err)
	}
}

package stream

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
)

// Info is what the api package knows of a connection's key: what it
// rechecks when a key or account changes.
type Info struct {
	// ID names the stream (its slot in the account's stream limit).
	ID        string
	AccountID string
	KeyID     string
	// KeyHash is the keyed hash of the key's secret (never the secret).
	KeyHash []byte
	// ExpiresAt is when the key expires: the stream is closed then
	// (4401, by the hub's sweep). Zero: never.
	ExpiresAt time.Time
}

// Conn is one stream. Its reader is Serve's goroutine; its writer, never
// two at once, is the fan-out worker that handed it a notice's prices
// (writeNow) or a goroutine started when something else waits or the
// client fell behind, gone when nothing waits (an idle connection costs no
// writer). The writer frames everything that waits itself and writes it to
// the socket in one write (writer.go, frames.go), not one write per message.
type Conn struct {
	hub  *Hub
	ws   *websocket.Conn
	nc   net.Conn // ws's connection: the writer writes its frames there
	Info Info

	mu sync.Mutex
	// subs are the markets subscribed, with what the writer was given of
	// each.
	subs map[string]*sub
	// control are acks and errors to write, in order, before any price;
	// controlBytes their size. Serve reads no command while they exceed
	// maxControl or maxControlBytes: a client that sends and does not read
	// is held back by TCP, not queued in the node.
	control      []outMsg
	controlBytes int
	// room is signalled when the writer took the control messages; quit is
	// closed when the connection closes or is cut.
	room     chan struct{}
	quit     chan struct{}
	quitOnce sync.Once
	// order lists the subscriptions with a price waiting, oldest first
	// (an entry whose price was taken, or that was unsubscribed, is
	// skipped); each holds its newest version waiting (sub.body).
	order []*sub
	// pingDue asks the writer for a ping.
	pingDue bool
	// writing: a writer runs (a goroutine, or a fan-out worker that
	// claimed the connection).
	writing bool
	// life holds the connection's state, a connState (state.go).
	life atomic.Uint32
	// closeCode and closeReason are the close the writer sends in
	// stateClosing.
	closeCode   int
	closeReason string

	// writingSince is when the message being written started (unix ns;
	// 0: none is): the sweep closes a connection whose write waits longer
	// than StallAfter.
	writingSince atomic.Int64
	nextPing     atomic.Int64
	writerDone   sync.WaitGroup
	onEnd        func()
	endOnce      sync.Once
	// seq, hdr, deadlineSet (unix ns), slow and sent are the writer's.
	seq         uint64
	hdr         []byte
	deadlineSet int64
	// slow: a write of this connection took long (the client reads
	// slowly); until it catches up, each message is written alone, so that
	// StallAfter is the wait for one message, not for a batch.
	slow bool
	sent []sentMsg
	// expires is Info.ExpiresAt (unix ns; 0: never), for the sweep.
	expires int64
	// in, when set, is the socket under the stream (SetInput); out, when
	// set, lets a fan-out worker write to it without waiting (SetOutput).
	in  Input
	out Output
	// unsent is what a write that did not wait (writeNow) left of its
	// frames, for the writer goroutine to write first; the writer's.
	unsent []byte
	// pong is the payload of the pong due (pongDue) to the client's last
	// ping: the writer writes it, as every frame (a frame of its may be
	// half written when the client's ping is read).
	pong    []byte
	pongDue bool
	// closeDone, when set, is closed once the writer stops after the close
	// frame (echoClose waits for it).
	closeDone chan struct{}
}

// sub is one subscribed market of one connection. The hub's topic holds
// it too, so a fan-out reaches it without a lookup; its fields are the
// connection's (under c.mu).
type sub struct {
	c  *Conn
	id string
	// state says whether its subscribe was acknowledged (until then its
	// prices wait) or it was removed (state.go).
	state subState
	// pending: body (its newest version) waits for the writer; at is when
	// its notice arrived (unix ns; 0: a resync or a snapshot). (state and
	// pending side by side keep a sub at 80 bytes, not 96: one per market
	// a connection subscribes.)
	pending bool
	body    []byte
	at      int64
	// rev is the newest revision handed to the writer (sent or waiting):
	// an older or equal one is never sent after it.
	rev int64
	// sum is the hash of that version's bytes: a newer revision with the
	// same bytes is no change (hub.go, topic.sum).
	sum uint64
}

// pendingPrice is a market's newest version waiting for the writer.
type pendingPrice struct {
	body []byte
	at   int64 // when its notice arrived (unix ns); 0: a resync or a snapshot
}

// outMsg is an ack or error waiting: its type and the rest of the object
// after seq (protocol.go).
type outMsg struct {
	typ  string
	rest []byte
}

func newConn(h *Hub, ws *websocket.Conn, info Info, onEnd func()) *Conn {
	// The writer writes to the connection under a wrapper that keeps the
	// library's own writes from waiting (api.streamConn).
	nc := ws.NetConn()
	if u, ok := nc.(interface{ Underlying() net.Conn }); ok {
		nc = u.Underlying()
	}
	c := &Conn{hub: h, ws: ws, nc: nc, Info: info, subs: map[string]*sub{}, onEnd: onEnd,
		room: make(chan struct{}, 1), quit: make(chan struct{})}
	c.nextPing.Store(time.Now().Add(h.cfg.PingEvery).UnixNano())
	if !info.ExpiresAt.IsZero() {
		c.expires = info.ExpiresAt.UnixNano()
	}
	return c
}

// Input is the socket under a stream as its wait for the client uses it
// (SetInput). The api package gives one for a TCP connection on Linux.
type Input interface {
	// Wait returns once a read would not block: bytes buffered above the
	// socket, bytes in it, the end of the stream, an error or a passed
	// read deadline (a cut is one).
	Wait() error
	// Peek copies into p what the client sent and nothing read yet,
	// without taking it; 0 when some of it sits in a buffer above the
	// socket (the read takes that first).
	Peek(p []byte) int
	// Discard takes n bytes that Peek showed.
	Discard(n int) error
}

// Output is the socket under a stream as the fan-out workers write to it
// (SetOutput). The api package gives one for a TCP connection on Linux.
type Output interface {
	// TryWrite writes what of b the socket takes now, without waiting for
	// the client: n < len(b) (and a nil error) when it is full.
	TryWrite(b []byte) (n int, err error)
}

// SetOutput lets the fan-out workers write a connection's prices
// themselves (writeNow) when its socket has room, instead of starting a
// writer goroutine for each. Call it before Serve.
func (c *Conn) SetOutput(out Output) {
	c.out = out
}

// SetInput gives Serve the socket under the stream: then the goroutine
// that waits for the client through an idle connection's life waits in
// the runtime's poller (Input.Wait), not inside the WebSocket library's
// read, and its stack stays small (2–4 KiB, against 8 KiB when it waited
// in the read, whose calls, with a command's handling, grow it). A
// client's pong or ping that arrives whole is taken there too (takeControl):
// the library's read does not return for control frames, so a pong read
// there would leave a reader waiting in it until the next command. Any
// other message is read and begun on a goroutine of its own (Serve). Call
// it before Serve.
func (c *Conn) SetInput(in Input) {
	c.in = in
}

// Subscribed lists the connection's markets (tests and metrics).
func (c *Conn) Subscribed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.subs))
	for id := range c.subs {
		ids = append(ids, id)
	}
	return ids
}

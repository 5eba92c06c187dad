package stream

import (
	"context"
	"hash/maphash"
	"net"
	"strconv"
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
// the socket in one write (writer.go), not one write per message.
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
	// closeCode is the close the writer sends next (0: none).
	closeCode   int
	closeReason string
	closeSent   bool
	ended       bool
	// released: Serve is returning, the connection is the server's again;
	// nothing may touch it.
	released bool
	// closing is closeCode != 0, for the writer between messages; isCut:
	// cut ran (startWrite must not move its deadline back).
	closing atomic.Bool
	isCut   atomic.Bool

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
	// removed: unsubscribed (or the connection ended); the hub may still
	// hold it for a moment.
	removed bool
	// pending: body (its newest version) waits for the writer; at is when
	// its notice arrived (unix ns; 0: a resync or a snapshot).
	pending bool
	// acked: its subscribe was acknowledged; until then its prices wait.
	// (The three flags side by side keep a sub at 80 bytes, not 96: one
	// per market a connection subscribes.)
	acked bool
	body  []byte
	at    int64
	// gen is the newest revision handed to the writer (sent or waiting):
	// an older or equal one is never sent after it.
	gen int64
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

// maxControlFrame is the largest control frame from a client: 2 header
// bytes, the 4-byte mask, 125 bytes of payload (RFC 6455 §5.5).
const maxControlFrame = 2 + 4 + 125

// takeControl takes a ping or a pong that waits whole in the socket, and
// answers it as the read would (the handlers Serve set); false when what
// waits is anything else (a message, a close, a part of a frame), which
// the read then takes.
func (c *Conn) takeControl() bool {
	var b [maxControlFrame]byte
	n := c.in.Peek(b[:])
	if n < 6 {
		return false
	}
	// FIN, no reserved bit, a ping or a pong, masked (a client must).
	if op := b[0]; op != 0x80|pongFrame && op != 0x80|pingFrame || b[1]&0x80 == 0 {
		return false
	}
	size := int(b[1] & 0x7f)
	if size > 125 || n < 6+size {
		return false
	}
	if err := c.in.Discard(6 + size); err != nil {
		c.cut() // the connection broke: the read that follows ends Serve
		return true
	}
	payload := b[6 : 6+size]
	for i := range payload {
		payload[i] ^= b[2+i%4]
	}
	handler := c.ws.PongHandler()
	if b[0] == 0x80|pingFrame {
		handler = c.ws.PingHandler()
	}
	if err := handler(string(payload)); err != nil {
		c.cut()
	}
	return true
}

// Serve reads the client's commands until the connection ends; it returns
// when the connection is closed and its writer has stopped (a WebSocket
// handler must not return before).
func (c *Conn) Serve(ctx context.Context) {
	defer c.end()
	ws := c.ws
	ws.SetReadLimit(MaxCommandBytes)
	pongWait := c.hub.cfg.PongWait
	ws.SetReadDeadline(time.Now().Add(pongWait)) //nolint:errcheck // a dead connection fails its next read
	ws.SetPongHandler(func(string) error {
		return ws.SetReadDeadline(time.Now().Add(pongWait))
	})
	// A client's ping and close are answered by the writer, the only one
	// that writes to the socket (a fan-out worker's write may have left a
	// frame half written: writeNow), not by the library's default handlers,
	// which write themselves.
	ws.SetPingHandler(func(data string) error {
		c.mu.Lock()
		c.pong, c.pongDue = append(c.pong[:0], data...), true
		c.kick()
		c.mu.Unlock()
		return nil
	})
	ws.SetCloseHandler(func(code int, _ string) error {
		c.echoClose(code)
		return nil
	})
	for {
		if !c.waitRoom() {
			return
		}
		if c.in == nil {
			// No socket to wait on: the read waits itself.
			out := c.readOne(ctx)
			if !out.ok {
				return
			}
			if out.then != nil {
				out.await(c.quit)
				out.then()
			}
			continue
		}
		// An error (a passed deadline, a cut) shows on the read too.
		c.in.Wait() //nolint:errcheck // as said
		if c.takeControl() {
			continue
		}
		// The read, the decoding and the start of the command's handling
		// run on a goroutine of their own, whose stack is gone when it
		// ends; this one waits, then finishes what waits for a read (a
		// subscribe's current prices), on its own small stack: during a
		// burst of subscribes the goroutines waiting for their reads hold
		// no stack grown by decoding.
		done := make(chan readOutcome, 1)
		go func() { done <- c.readOne(ctx) }()
		out := <-done
		if !out.ok {
			return
		}
		if out.then != nil {
			// Wait here, with nothing on the stack; then finish (the ack,
			// the prices) on a goroutine of its own too.
			out.await(c.quit)
			go func() { out.then(); done <- readOutcome{} }()
			<-done
		}
	}
}

// readOutcome is what reading a message left: ok false when the
// connection ended; then, what remains of its command once await
// returns (nil: nothing).
type readOutcome struct {
	ok    bool
	await func(quit <-chan struct{})
	then  func()
}

// readOne reads one message and begins its command. (Control frames,
// pings and pongs, are handled inside the read.)
func (c *Conn) readOne(ctx context.Context) readOutcome {
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		return readOutcome{}
	}
	out := readOutcome{ok: true}
	if p, then := c.handle(ctx, data); then != nil {
		out.await, out.then = p.await, then
	}
	return out
}

// The bound on acks and errors waiting for a client that does not read.
const (
	maxControl      = 8
	maxControlBytes = 128 << 10
)

// waitRoom waits until the control messages are under their bound; false:
// the connection closed meanwhile.
func (c *Conn) waitRoom() bool {
	for {
		c.mu.Lock()
		full := len(c.control) >= maxControl || c.controlBytes >= maxControlBytes
		c.mu.Unlock()
		if !full {
			return true
		}
		select {
		case <-c.room:
		case <-c.quit:
			return false
		}
	}
}

// pushControl queues an ack or error; c.mu is held.
func (c *Conn) pushControl(m outMsg) {
	c.control = append(c.control, m)
	c.controlBytes += len(m.rest)
	c.kick()
}

// handle runs a command, and returns the read it waits for and what of it
// remains to be done once that read is done (nil: nothing).
func (c *Conn) handle(ctx context.Context, data []byte) (*pendingCurrent, func()) {
	cmd, err := ParseCommand(data)
	if err != nil {
		c.hub.m.commandErrors.Inc()
		c.sendError("invalid_request", err.Error())
		return nil, nil
	}
	switch cmd.Op {
	case OpSubscribe:
		return c.subscribe(ctx, cmd.MarketIDs)
	case OpUnsubscribe:
		c.unsubscribe(cmd.MarketIDs)
	}
	return nil, nil
}

// subscribe registers ids (so no change is missed from now on) and starts
// reading their current prices; what it returns waits for them, then
// acknowledges and queues those prices after the ack. A market not served
// is in missing and not subscribed.
func (c *Conn) subscribe(ctx context.Context, ids []string) (*pendingCurrent, func()) {
	c.mu.Lock()
	var fresh []*sub
	for _, id := range ids {
		if c.subs[id] == nil {
			fresh = append(fresh, &sub{c: c, id: id})
		}
	}
	if n := len(c.subs) + len(fresh); n > MaxMarkets {
		c.mu.Unlock()
		c.sendError("invalid_request", "this subscribe would make "+strconv.Itoa(n)+
			" markets subscribed on this connection: at most "+strconv.Itoa(MaxMarkets)+"; nothing was subscribed")
		return nil, nil
	}
	for _, st := range fresh {
		c.subs[st.id] = st
	}
	c.mu.Unlock()
	c.hub.subscribe(fresh)
	p := c.hub.beginCurrent(ctx, ids)
	return p, func() { c.subscribed(ids, fresh, p) }
}

// subscribed finishes a subscribe once its current prices are read.
func (c *Conn) subscribed(ids []string, fresh []*sub, p *pendingCurrent) {
	items, err := p.wait()
	if err != nil {
		c.mu.Lock()
		for _, st := range fresh {
			c.drop(st)
		}
		c.mu.Unlock()
		c.hub.unsubscribe(fresh)
		c.sendError("unavailable", "prices cannot be read right now; nothing was subscribed: subscribe again")
		return
	}
	var accepted, missing []string
	for i, id := range ids {
		if !items[i].Found || !items[i].Served {
			missing = append(missing, id)
			continue
		}
		accepted = append(accepted, id)
	}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	var gone []*sub
	for _, id := range missing {
		if st := c.subs[id]; st != nil {
			c.drop(st)
			gone = append(gone, st)
		}
	}
	c.pushControl(outMsg{"subscribed", subscribedRest(accepted, missing)})
	for i, id := range ids {
		st := c.subs[id]
		if st == nil {
			continue
		}
		st.acked = true
		// The snapshot: the current price, unless a newer one came through
		// a notice meanwhile (then that one is the current price).
		if it := items[i]; it.Body != nil && it.Gen >= st.gen {
			st.gen, st.sum = it.Gen, maphash.Bytes(c.hub.seed, it.Body)
			c.queuePrice(st, it.Body, 0)
		}
	}
	c.kick()
	c.mu.Unlock()
	// Markets subscribed before and missing now are dropped too.
	c.hub.unsubscribe(gone)
}

// drop ends a subscription on the connection's side; c.mu is held. The
// caller takes it out of the hub.
func (c *Conn) drop(st *sub) {
	st.removed, st.pending, st.body = true, false, nil
	delete(c.subs, st.id)
}

// unsubscribe drops ids; nothing more is written for them after the ack.
func (c *Conn) unsubscribe(ids []string) {
	c.mu.Lock()
	var gone []*sub
	for _, id := range ids {
		if st := c.subs[id]; st != nil {
			c.drop(st)
			gone = append(gone, st)
		}
	}
	c.pushControl(outMsg{"unsubscribed", unsubscribedRest(ids)})
	c.mu.Unlock()
	c.hub.unsubscribe(gone)
}

func (c *Conn) sendError(code, message string) {
	c.mu.Lock()
	c.pushControl(outMsg{"error", errorRest(code, message)})
	c.mu.Unlock()
}

// deliver takes a market's version from the hub: it replaces the one
// waiting, if any (conflation), and is dropped when the connection has
// been given this version or a newer one.
func (st *sub) deliver(gen int64, body []byte, sum uint64, at int64, f *flusher) {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.removed || gen <= st.gen || c.closeCode != 0 {
		return
	}
	st.gen = gen
	if sum == st.sum {
		return // the bytes it has, under a newer revision
	}
	st.sum = sum
	c.queuePrice(st, body, at)
	if st.acked {
		c.claim(f)
	}
}

// queuePrice makes body the version of st waiting; c.mu is held.
func (c *Conn) queuePrice(st *sub, body []byte, at int64) {
	if st.pending {
		c.hub.m.conflated.Inc()
	} else {
		st.pending = true
		c.order = append(c.order, st)
	}
	st.body, st.at = body, at
}

// kick starts the writer unless it runs; c.mu is held.
func (c *Conn) kick() {
	if c.writing || c.ended {
		return
	}
	c.writing = true
	c.writerDone.Add(1)
	go c.write(nil)
}

// Close ends the connection with code: the close frame goes out after the
// message being written, if any, and nothing else does; the connection is
// cut if the client has not answered within CloseWait (a writer blocked on
// a client that does not read fails then too).
func (c *Conn) Close(code int, reason string) {
	c.closeWith(code, reason, c.hub.cfg.CloseWait)
}

// sweep runs every sweepEvery: a ping when due, and the 4008 close of a
// writer that waited StallAfter on one message.
func (c *Conn) sweep(now int64) {
	if c.expires != 0 && now >= c.expires {
		c.Close(CloseRevoked, "the API key expired")
		return
	}
	if since := c.writingSince.Load(); since != 0 && now-since > int64(c.hub.cfg.StallAfter) {
		// The message being written still has StallGrace to complete: a
		// client that reads again then gets the 4008 close frame after
		// whole messages.
		c.closeWith(CloseStalled, "the client read nothing for "+c.hub.cfg.StallAfter.String(), c.hub.cfg.StallGrace)
		return
	}
	if now >= c.nextPing.Load() {
		c.nextPing.Store(now + int64(c.hub.cfg.PingEvery))
		c.mu.Lock()
		c.pingDue = true
		c.kick()
		c.mu.Unlock()
	}
}

func (c *Conn) closeWith(code int, reason string, wait time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeCode != 0 || c.ended {
		return
	}
	c.closeCode, c.closeReason = code, reason
	c.closing.Store(true)
	c.quitOnce.Do(func() { close(c.quit) })
	c.hub.m.closed(code)
	time.AfterFunc(wait, c.cut)
	c.kick()
}

// echoClose answers a client's close frame with its code, as the library
// would, through the writer, and waits for it at most CloseWait: the read
// that took the frame ends the stream (and cuts the connection) once this
// returns. After the node's own close there is nothing to answer.
func (c *Conn) echoClose(code int) {
	c.mu.Lock()
	if c.closeCode != 0 || c.ended {
		c.mu.Unlock()
		return
	}
	c.closeCode = code
	c.closing.Store(true)
	c.quitOnce.Do(func() { close(c.quit) })
	done := make(chan struct{})
	c.closeDone = done
	c.kick()
	c.mu.Unlock()
	t := time.NewTimer(c.hub.cfg.CloseWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// sendClose writes the close frame (the writer frames it, as every
// frame: the library's own writes never wait, see api.streamConn); the
// client's answer ends Serve's read, and Close's timer cuts the connection
// if none comes.
func (c *Conn) sendClose(code int, reason string) {
	deadline := time.Now().Add(c.hub.cfg.CloseWait)
	if code == CloseStalled {
		deadline = time.Now().Add(c.hub.cfg.StallGrace)
	}
	payload := websocket.FormatCloseMessage(code, reason)
	if len(payload) > 125 { // a control frame's most (RFC 6455 §5.5)
		payload = payload[:125]
	}
	b := append([]byte{0x80 | closeFrame, byte(len(payload))}, payload...)
	if err := c.nc.SetWriteDeadline(deadline); err != nil || c.isCut.Load() {
		c.cut()
		return
	}
	c.deadlineSet = 0 // the next write moves it again
	if _, err := c.nc.Write(b); err != nil {
		c.cut()
	}
}

// cut ends the connection at once: its read and any write fail now, so
// Serve returns, and whoever called Serve closes the connection then
// (closing it here would free its descriptor under a writer that may
// still hold it).
func (c *Conn) cut() {
	c.isCut.Store(true)
	c.quitOnce.Do(func() { close(c.quit) })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return // the server has the connection back: it is closed or reused
	}
	c.ws.NetConn().SetDeadline(longAgo) //nolint:errcheck // a closed connection is cut already
}

// longAgo is a deadline in the past: it fails the reads and writes waiting.
var longAgo = time.Unix(1, 0)

// end runs once when Serve's read loop stops: the connection is cut, its
// writer waited for, its subscriptions dropped and the hub told.
func (c *Conn) end() {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.ended = true
		subs := make([]*sub, 0, len(c.subs))
		for _, st := range c.subs {
			st.removed = true
			subs = append(subs, st)
		}
		c.mu.Unlock()
		c.cut()
		c.writerDone.Wait()
		c.mu.Lock()
		c.released = true
		c.mu.Unlock()
		// Before the hub lets Shutdown return (remove), so that what
		// onEnd starts is under way by then.
		if c.onEnd != nil {
			c.onEnd()
		}
		c.hub.remove(c, subs)
	})
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

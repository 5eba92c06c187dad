package stream

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/fasthttp/websocket"
)

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
// pings and pongs, are handled inside the read; a message over
// MaxCommandBytes ends the read, and the library closes with 1009.) A
// binary message, or a text message that is not UTF-8, is no command: it
// closes the connection (1003, 1007), and the read goes on until the
// client answers the close or CloseWait cuts the connection.
func (c *Conn) readOne(ctx context.Context) readOutcome {
	typ, data, err := c.ws.ReadMessage()
	if err != nil {
		return readOutcome{}
	}
	out := readOutcome{ok: true}
	switch {
	case typ != websocket.TextMessage:
		c.Close(CloseUnsupportedData, "commands are text messages")
	case !utf8.Valid(data):
		c.Close(CloseInvalidPayload, "a text message must be UTF-8")
	default:
		if p, then := c.handle(ctx, data); then != nil {
			out.await, out.then = p.await, then
		}
	}
	return out
}

package stream

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/fasthttp/websocket"
)

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
	if err := c.nc.SetWriteDeadline(deadline); err != nil || c.state() >= stateCut {
		c.cut()
		return
	}
	c.deadlineSet = 0 // the next write moves it again
	if _, err := c.nc.Write(b); err != nil {
		c.cut()
	}
}

// writeBatch writes a pong and a ping, then acks and errors, then prices:
// framed together, up to maxWrite bytes a write (one message a write while
// the client reads slowly). A close stops the batch between writes: the
// close frame goes next. With now, the writes never wait (Output.TryWrite):
// once the socket takes less than a write, what it did not take is kept in
// c.unsent, the batch stops (w.framedBatch and w.framedBodies say where),
// and the connection counts as slow until it has caught up: the writer
// goroutine writes the rest, so the stall deadline still bounds one
// message, not a batch.
func (c *Conn) writeBatch(w *writeWork, now bool) error {
	defer c.writingSince.Store(0)
	clear(c.sent)
	c.sent = c.sent[:0] // framed by a batch a close stopped: never written
	w.framedBatch, w.framedBodies = 0, 0
	bp := writeBufs.Get().(*[]byte)
	b := (*bp)[:0]
	defer func() {
		if cap(b) <= 4*maxWrite {
			*bp = b[:0]
			writeBufs.Put(bp)
		}
	}()
	if w.pongDue {
		b = append(b, 0x80|pongFrame, byte(len(w.pong)))
		b = append(b, w.pong...)
	}
	if w.ping {
		b = append(b, 0x80|pingFrame, 0)
	}
	var err error
	flush := func() bool {
		if len(b) == 0 {
			return true
		}
		if !c.state().takesPrices() {
			return false
		}
		if now {
			// The deadline matters to a write that does not wait too: one
			// passed fails it (a cut is one), so it moves as the writer
			// goroutine's does.
			if _, err = c.startWrite(); err != nil {
				return false
			}
			var n int
			c.hub.m.writes.Inc()
			if n, err = c.out.TryWrite(b); err != nil {
				return false
			}
			if n < len(b) {
				c.slow = true
				c.unsent = append(c.unsent[:0], b[n:]...)
				return false
			}
		} else if err = c.writeFrames(b); err != nil {
			return false
		}
		c.countSent()
		b = b[:0]
		return true
	}
	for _, m := range w.batch {
		b = c.appendMessage(b, m.typ, m.rest, nil, 0)
		w.framedBatch++
		if (c.slow || len(b) >= maxWrite) && !flush() {
			return err
		}
	}
	for _, p := range w.bodies {
		b = c.appendMessage(b, "price", nil, p.body, p.at)
		w.framedBodies++
		if (c.slow || len(b) >= maxWrite) && !flush() {
			return err
		}
	}
	flush()
	return err
}

// countSent counts the messages just written.
func (c *Conn) countSent() {
	for _, m := range c.sent {
		if m.typ == "price" {
			c.hub.m.sentPrice(m.at)
		} else {
			c.hub.m.sent(m.typ)
		}
	}
	clear(c.sent)
	c.sent = c.sent[:0]
}

// writeFrames writes b, whole frames, in one write, and notes a slow one.
func (c *Conn) writeFrames(b []byte) error {
	start, err := c.startWrite()
	if err != nil {
		return err
	}
	c.hub.m.writes.Inc()
	if _, err := c.nc.Write(b); err != nil {
		return err
	}
	if time.Duration(time.Now().UnixNano()-start) > c.hub.cfg.StallAfter/16 {
		c.slow = true
	}
	return nil
}

// startWrite marks the start of a write for the sweep, and moves the
// write deadline (only a backstop: the sweep closes a stalled writer with
// 4008 first) so that it is always more than StallAfter + StallGrace + 1 s
// away. (The deadline moves at most once a second: it is not free.) It
// returns the write's start (unix ns).
func (c *Conn) startWrite() (int64, error) {
	now := time.Now().UnixNano()
	c.writingSince.Store(now)
	if now-c.deadlineSet < int64(time.Second) {
		return now, nil
	}
	c.deadlineSet = now
	cfg := &c.hub.cfg
	if err := c.nc.SetWriteDeadline(time.Unix(0, now).Add(cfg.StallAfter + cfg.StallGrace + 2*time.Second)); err != nil {
		return now, err
	}
	// A cut (a deadline in the past) that came before this deadline must
	// not be undone by it: cut marks itself before it sets its deadline.
	if c.state() >= stateCut {
		return now, errCut
	}
	return now, nil
}

// WebSocket opcodes the writer frames (RFC 6455 §5.2).
const (
	textFrame  = 0x1
	closeFrame = 0x8
	pingFrame  = 0x9
	pongFrame  = 0xA
)

// appendMessage appends one text frame to b: {"type":typ,"seq":N then
// rest (which starts with a comma), or then a comma and body without its
// opening brace (wireObject). It assigns the message's seq.
func (c *Conn) appendMessage(b []byte, typ string, rest, body []byte, at int64) []byte {
	c.seq++
	h := append(c.hdr[:0], `{"type":"`...)
	h = append(h, typ...)
	h = append(h, `","seq":`...)
	h = strconv.AppendUint(h, c.seq, 10)
	if body != nil {
		h = append(h, ',')
		rest = body[1:]
	}
	c.hdr = h
	n := len(h) + len(rest)
	b = append(b, 0x80|textFrame)
	switch {
	case n < 126:
		b = append(b, byte(n))
	case n <= 0xffff:
		b = append(b, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, h...)
	b = append(b, rest...)
	c.sent = append(c.sent, sentMsg{typ: typ, at: at})
	return b
}

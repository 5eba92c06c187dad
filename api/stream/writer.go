package stream

import (
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"time"
)

// The writer frames the messages waiting itself and hands them to the
// socket in one write: a WebSocket frame from a server is a two to ten
// byte header and the payload, unmasked, so a batch is those back to back.
// (The WebSocket library writes one frame per call, one write(2) each:
// that was a third of a busy node's CPU.) The library still reads, and
// writes control frames (the pong to a client's ping, the close frame):
// a write to a TCP connection is never interleaved with another, so each
// frame stays whole.

// maxWrite is how many bytes of frames one write carries (a message
// longer than that is written alone): about ten price messages, a quarter
// of what the socket keeps unsent (api.streamNotSentLowat). StallAfter is
// the wait for one write: a client that reads slowly but steadily takes
// 4 KiB well within it, and after one slow write (StallAfter/16) the
// writer writes each message alone until the client has caught up.
const maxWrite = 4 << 10

// writeBufs are the writers' buffers, taken for a batch and given back
// after it: an idle connection holds none.
var writeBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, maxWrite+1024)
	return &b
}}

// sentMsg is a message framed in the buffer and not written yet: its
// metrics count once it is written.
type sentMsg struct {
	typ string
	at  int64
}

// errCut is a write after the connection was cut.
var errCut = errors.New("stream: the connection was cut")

// write is the writer: it writes what waits until nothing does, then
// exits. Only it writes data frames and assigns seq.
func (c *Conn) write() {
	defer c.writerDone.Done()
	var batch []outMsg
	var bodies []pendingPrice
	for {
		c.mu.Lock()
		if c.ended {
			c.writing = false
			c.mu.Unlock()
			return
		}
		if c.closeCode != 0 {
			code, reason, sent := c.closeCode, c.closeReason, c.closeSent
			c.closeSent = true
			c.mu.Unlock()
			if !sent {
				c.sendClose(code, reason)
			}
			c.mu.Lock()
			c.writing = false
			c.mu.Unlock()
			return
		}
		ping := c.pingDue
		c.pingDue = false
		batch = append(batch[:0], c.control...)
		clear(c.control)
		c.control, c.controlBytes = c.control[:0], 0
		select {
		case c.room <- struct{}{}:
		default:
		}
		bodies = bodies[:0]
		keep := c.order[:0]
		for _, st := range c.order {
			switch {
			case !st.pending || st.removed:
				// taken already, or unsubscribed
			case !st.acked:
				keep = append(keep, st)
			default:
				bodies = append(bodies, pendingPrice{body: st.body, at: st.at})
				st.pending, st.body = false, nil
			}
		}
		clear(c.order[len(keep):])
		c.order = keep
		if !ping && len(batch) == 0 && len(bodies) == 0 {
			c.writing, c.slow = false, false // caught up
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()

		if err := c.writeBatch(ping, batch, bodies); err != nil {
			c.cut()
			c.mu.Lock()
			c.writing = false
			c.mu.Unlock()
			return
		}
	}
}

// writeBatch writes a ping, then acks and errors, then prices: framed
// together, up to maxWrite bytes a write (one message a write while the
// client reads slowly). A close stops the batch between writes: the close
// frame goes next.
func (c *Conn) writeBatch(ping bool, batch []outMsg, prices []pendingPrice) error {
	defer c.writingSince.Store(0)
	clear(c.sent)
	c.sent = c.sent[:0] // framed by a batch a close stopped: never written
	bp := writeBufs.Get().(*[]byte)
	b := (*bp)[:0]
	defer func() {
		if cap(b) <= 4*maxWrite {
			*bp = b[:0]
			writeBufs.Put(bp)
		}
	}()
	if ping {
		b = append(b, 0x80|pingFrame, 0)
	}
	var err error
	flush := func() bool {
		if len(b) == 0 {
			return true
		}
		if c.closing.Load() {
			return false
		}
		err = c.writeFrames(b)
		b = b[:0]
		if err != nil {
			return false
		}
		c.countSent()
		return true
	}
	for _, m := range batch {
		b = c.appendMessage(b, m.typ, m.rest, nil, 0)
		if (c.slow || len(b) >= maxWrite) && !flush() {
			return err
		}
	}
	for _, p := range prices {
		b = c.appendMessage(b, "price", nil, p.body, p.at)
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
	// not be undone by it.
	select {
	case <-c.quit:
		if !c.closing.Load() {
			return now, errCut
		}
	default:
	}
	return now, nil
}

// WebSocket opcodes the writer frames (RFC 6455 §5.2).
const (
	textFrame = 0x1
	pingFrame = 0x9
	pongFrame = 0xA
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

package stream

import (
	"errors"
	"slices"
	"sync"
)

// The writer frames the messages waiting itself and hands them to the
// socket in one write: a WebSocket frame from a server is a two to ten
// byte header and the payload, unmasked, so a batch is those back to back.
// (The WebSocket library writes one frame per call, one write(2) each:
// that was a third of a busy node's CPU.) The writer is the fan-out worker
// that claimed the connection (writeNow, writes that never wait) or a
// writer goroutine (write, which waits for a client that fell behind).
// A write that does not wait may leave a frame half written, so the writer
// frames every frame the node sends, control frames too (pongs, the close
// frame, the answer to a client's close); the library only reads, and its
// own close on a client's protocol error never waits (api.streamConn).

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

// writeWork is what one batch of the writer writes, taken from the
// connection under its lock (takeWork); its slices are reused.
type writeWork struct {
	ping    bool
	pongDue bool
	pong    []byte
	batch   []outMsg
	bodies  []pendingPrice
	// framedBatch and framedBodies count the messages of batch and bodies
	// a batch written without waiting framed before the socket filled
	// (writeBatch): the rest goes to the writer goroutine.
	framedBatch, framedBodies int
}

// takeWork moves what waits into w: false when nothing does. c.mu is held.
func (c *Conn) takeWork(w *writeWork) bool {
	w.ping, w.pongDue = c.pingDue, c.pongDue
	c.pingDue = false
	w.pong = append(w.pong[:0], c.pong...)
	c.pongDue, c.pong = false, nil
	w.batch = append(w.batch[:0], c.control...)
	clear(c.control)
	c.control, c.controlBytes = c.control[:0], 0
	select {
	case c.room <- struct{}{}:
	default:
	}
	clear(w.bodies)
	w.bodies = w.bodies[:0]
	keep := c.order[:0]
	for _, st := range c.order {
		switch {
		case !st.pending || st.state == subRemoved:
			// taken already, or unsubscribed
		case st.state == subNew:
			keep = append(keep, st)
		default:
			w.bodies = append(w.bodies, pendingPrice{body: st.body, at: st.at})
			st.pending, st.body = false, nil
		}
	}
	clear(c.order[len(keep):])
	c.order = keep
	return w.ping || w.pongDue || len(w.batch) > 0 || len(w.bodies) > 0
}

// stopWriting ends the writer's turn after a failed write.
func (c *Conn) stopWriting() {
	c.mu.Lock()
	c.writerStopped()
	c.mu.Unlock()
}

// writerStopped ends the writer's turn and frees a wait for the close
// frame (echoClose); c.mu is held.
func (c *Conn) writerStopped() {
	c.writing = false
	if c.closeDone != nil {
		close(c.closeDone)
		c.closeDone = nil
	}
}

// write is the writer goroutine: it writes what waits until nothing does,
// then exits. Only the writer (this goroutine, or a fan-out worker in
// writeNow) writes to the socket and assigns seq. rest, when not nil, is
// what a fan-out worker's batch left (writeNow): the end of the frame it
// could not write (c.unsent) goes first, then the messages it had not
// framed, one a write like any slow client's.
func (c *Conn) write(rest *writeWork) {
	defer c.writerDone.Done()
	if len(c.unsent) > 0 {
		err := c.writeFrames(c.unsent)
		c.writingSince.Store(0)
		c.unsent = nil
		if err != nil {
			c.cut()
			c.stopWriting()
			return
		}
		c.countSent()
	}
	if rest != nil && (len(rest.batch) > 0 || len(rest.bodies) > 0) {
		if err := c.writeBatch(rest, false); err != nil {
			c.cut()
			c.stopWriting()
			return
		}
	}
	var w writeWork
	for {
		c.mu.Lock()
		switch c.state() {
		case stateOpen:
		case stateClosing:
			code, reason := c.closeCode, c.closeReason
			c.move(stateCloseSent)
			c.mu.Unlock()
			c.sendClose(code, reason)
			c.stopWriting()
			return
		default:
			// The close frame went out, or the socket is cut: nothing
			// more is written.
			c.writerStopped()
			c.mu.Unlock()
			return
		}
		if !c.takeWork(&w) {
			c.writing, c.slow = false, false // caught up
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if err := c.writeBatch(&w, false); err != nil {
			c.cut()
			c.stopWriting()
			return
		}
	}
}

// writeNow is the writer run by the fan-out worker that claimed the
// connection (claim): it writes what waits with writes that never wait
// for the client (Output.TryWrite), so a delivery to a client that keeps
// up costs no goroutine and no switch to one. It hands the rest to a
// writer goroutine (write) when the socket takes less than a write (the
// client fell behind: that goroutine waits for it, with the stall
// deadline), when a close is due, or when the client reads slowly.
func (c *Conn) writeNow(w *writeWork) {
	for {
		c.mu.Lock()
		s := c.state()
		if !s.writable() {
			c.writerStopped()
			c.mu.Unlock()
			c.writerDone.Done()
			return
		}
		if !s.takesPrices() || c.slow {
			c.mu.Unlock()
			go c.write(nil)
			return
		}
		if !c.takeWork(w) {
			c.writing = false
			c.mu.Unlock()
			c.writerDone.Done()
			return
		}
		c.mu.Unlock()
		if err := c.writeBatch(w, true); err != nil {
			c.cut()
			c.stopWriting()
			c.writerDone.Done()
			return
		}
		if len(c.unsent) > 0 {
			// The socket is full: the rest of the batch goes to a writer
			// goroutine, by reference (the notices' bytes), not framed.
			rest := &writeWork{batch: slices.Clone(w.batch[w.framedBatch:]), bodies: slices.Clone(w.bodies[w.framedBodies:])}
			go c.write(rest)
			return
		}
	}
}

// claim makes the fan-out worker behind f the connection's writer for
// what waits, once its notice's items are handed out (flusher.flush);
// without an Output, or with a writer running, it is kick. c.mu is held.
func (c *Conn) claim(f *flusher) {
	if f == nil || c.out == nil {
		c.kick()
		return
	}
	if c.writing || !c.state().writable() {
		return
	}
	c.writing = true
	c.writerDone.Add(1)
	f.conns = append(f.conns, c)
}

// flusher is a fan-out worker's connections claimed while it handed out
// a notice's items: each is written once after all of them, so that a
// connection given several of the notice's markets gets them in one
// write.
type flusher struct {
	conns []*Conn
	w     writeWork
}

func (f *flusher) flush() {
	for i, c := range f.conns {
		c.writeNow(&f.w)
		f.conns[i] = nil
	}
	f.conns = f.conns[:0]
	clear(f.w.bodies)
	clear(f.w.batch)
}

// kick starts the writer unless it runs; c.mu is held.
func (c *Conn) kick() {
	if c.writing || !c.state().writable() {
		return
	}
	c.writing = true
	c.writerDone.Add(1)
	go c.write(nil)
}

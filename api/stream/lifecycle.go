package stream

import (
	"time"

	"github.com/fasthttp/websocket"
)

// Close codes (contract §3; 1003 and 1007 as RFC 6455 §7.4.1 has them).
const (
	CloseGoingAway       = websocket.CloseGoingAway               // 1001: the node shuts down
	CloseRevoked         = 4401                                   // the key was revoked or expired
	CloseAccessRemoved   = 4403                                   // the account's access was withdrawn
	CloseStalled         = 4008                                   // the client took nothing for StallAfter
	CloseUnsupportedData = websocket.CloseUnsupportedData         // 1003: a binary message (commands are text)
	CloseInvalidPayload  = websocket.CloseInvalidFramePayloadData // 1007: a text message that is not UTF-8
)

// Close ends the connection with code: the close frame goes out after the
// message being written, if any, and nothing else does; the connection is
// cut if the client has not answered within CloseWait (a writer blocked on
// a client that does not read fails then too).
func (c *Conn) Close(code int, reason string) {
	c.closeWith(code, reason, c.hub.cfg.CloseWait)
}

func (c *Conn) closeWith(code int, reason string, wait time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.move(stateClosing) {
		return
	}
	c.closeCode, c.closeReason = code, reason
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
	if !c.move(stateClosing) {
		c.mu.Unlock()
		return
	}
	c.closeCode = code
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

// cut ends the connection at once: its read and any write fail now, so
// Serve returns, and whoever called Serve closes the connection then
// (closing it here would free its descriptor under a writer that may
// still hold it).
func (c *Conn) cut() {
	c.quitOnce.Do(func() { close(c.quit) })
	c.mu.Lock()
	defer c.mu.Unlock()
	// The state shows the cut before the deadline does: a writer that
	// moves its deadline after this looks at the state then (startWrite).
	c.move(stateCut)
	if c.state() == stateReleased {
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
		c.move(stateEnded)
		subs := make([]*sub, 0, len(c.subs))
		for _, st := range c.subs {
			st.remove()
			subs = append(subs, st)
		}
		c.mu.Unlock()
		c.cut()
		c.writerDone.Wait()
		c.mu.Lock()
		c.move(stateReleased)
		c.mu.Unlock()
		// Before the hub lets Shutdown return (remove), so that what
		// onEnd starts is under way by then.
		if c.onEnd != nil {
			c.onEnd()
		}
		c.hub.remove(c, subs)
	})
}

// Package edge is what every connection of an API node passes before a
// route sees it (contract, HTTP edge): the listener that caps open
// connections and outlasts accept failures, the connection that keeps the
// request and idle deadlines, and the fixed answers to requests that cannot
// be read. It knows nothing of the routes.
package edge

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Conn is one accepted connection with the contract's read deadlines
// (HTTP edge): a request must arrive whole within requestTimeout of its
// first byte, and a connection that waits idleTimeout for a request is
// closed quietly.
//
// fasthttp cannot do both itself: its ReadTimeout runs from the moment it
// starts waiting for the first request of a connection, so a client that
// opened a connection and has not spoken yet gets an unasked 408 after
// ReadTimeout. So the node gives fasthttp no read timeouts and the
// connection keeps them: it knows when a request's first byte arrives (a
// read that returns data while idle, or fasthttp's StateActive for a
// request whose first bytes it already buffered: pipelining) and when the
// answer is done (fasthttp's StateIdle, see ConnState). A write does not
// end the request: fasthttp writes an interim "100 Continue" before the
// body, and flushes a pipelined answer while the next request is half read.
// An idle wait that runs out looks like the client closing (io.EOF), which
// fasthttp ends without an answer; a request that runs out gets the timeout
// error, which the edge answers 408.
//
// Anyone else setting a read deadline (fasthttp before handing a hijacked
// connection to a WebSocket handler) takes the deadlines over: from then on
// the connection passes everything through.
type Conn struct {
	net.Conn
	requestTimeout time.Duration
	idleTimeout    time.Duration
	// inRequest: a byte of a request has arrived and its answer is not
	// done; answered: some answer is done. Only the serving goroutine
	// touches them, and only while the connection is not handed over.
	inRequest  bool
	answered   bool
	handedOver atomic.Bool
	closeOnce  sync.Once
	onClose    func()
	// also runs once when the connection closes (a stream's slot): set by
	// the handler that hijacks the connection.
	also atomic.Pointer[func()]
	// ahead holds what a short read brought beyond what it asked for
	// (readAhead), ahead[off:] not yet returned; nil when none. Only the
	// reading goroutine touches it.
	ahead *[]byte
	off   int
}

// readAhead: fasthttp reads a kept-alive connection's next request by its
// first byte alone (ReduceMemoryUsage: it holds no buffer while it waits),
// then the rest, which costs every request a second read(2) — a sixth of a
// busy node's CPU on small answers. A read shorter than readAheadMin reads
// up to readAheadSize instead, in the same system call, and hands out the
// rest before reading the connection again. The buffer is pooled and given
// back once drained, so a waiting connection still holds none.
const (
	readAheadMin  = 64
	readAheadSize = 4096
)

var readAheadPool = sync.Pool{New: func() any { b := make([]byte, readAheadSize); return &b }}

// read is the connection's Read with the read-ahead.
func (c *Conn) read(p []byte) (int, error) {
	if c.ahead != nil {
		b := *c.ahead
		n := copy(p, b[c.off:])
		if c.off += n; c.off == len(b) {
			*c.ahead = (*c.ahead)[:cap(*c.ahead)]
			readAheadPool.Put(c.ahead)
			c.ahead = nil
		}
		return n, nil
	}
	if len(p) >= readAheadMin || len(p) == 0 {
		return c.Conn.Read(p)
	}
	buf := readAheadPool.Get().(*[]byte)
	n, err := c.Conn.Read(*buf)
	if n <= len(p) {
		copy(p, (*buf)[:n])
		readAheadPool.Put(buf)
		return n, err
	}
	// More than asked for: keep the rest. An error that came with the
	// bytes comes again on the read after them.
	copy(p, (*buf)[:len(p)])
	*buf = (*buf)[:n]
	c.ahead, c.off = buf, len(p)
	return len(p), nil
}

func newConn(c net.Conn, requestTimeout, idleTimeout time.Duration, onClose func()) *Conn {
	ec := &Conn{Conn: c, requestTimeout: requestTimeout, idleTimeout: idleTimeout, onClose: onClose}
	ec.Conn.SetReadDeadline(time.Now().Add(idleTimeout)) //nolint:errcheck // a closed conn fails its next read
	return ec
}

// Read starts the request deadline at a request's first byte and turns an
// idle wait that ran out into io.EOF.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.read(p)
	if c.handedOver.Load() {
		return n, err
	}
	if n > 0 && !c.inRequest {
		c.inRequest = true
		c.Conn.SetReadDeadline(time.Now().Add(c.requestTimeout)) //nolint:errcheck // as above
	}
	if err != nil && !c.inRequest && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, io.EOF
	}
	return n, err
}

// active is fasthttp's StateActive: a request begins. After a first
// answer it means a byte of the next request is at hand, perhaps already
// buffered by fasthttp with the previous request (no Read saw it): the
// request deadline starts now. (Before the first request fasthttp may say
// so before any byte arrived; Read starts that request.)
func (c *Conn) active() {
	if c.handedOver.Load() || c.inRequest || !c.answered {
		return
	}
	c.inRequest = true
	c.Conn.SetReadDeadline(time.Now().Add(c.requestTimeout)) //nolint:errcheck // as above
}

// idle is fasthttp's StateIdle: the answer is done; the idle wait for the
// next request starts.
func (c *Conn) idle() {
	if c.handedOver.Load() {
		return
	}
	c.inRequest, c.answered = false, true
	c.Conn.SetReadDeadline(time.Now().Add(c.idleTimeout)) //nolint:errcheck // as above
}

// ConnState is the fasthttp.Server's ConnState hook that tells each
// Conn where its requests begin and end. fasthttp calls it for
// StateActive and StateIdle on the connection's serving goroutine.
func ConnState(nc net.Conn, st fasthttp.ConnState) {
	c, ok := nc.(*Conn)
	if !ok {
		return
	}
	switch st {
	case fasthttp.StateActive:
		c.active()
	case fasthttp.StateIdle:
		c.idle()
	}
}

// SetDeadline hands the read deadlines over to the caller.
func (c *Conn) SetDeadline(t time.Time) error {
	c.handedOver.Store(true)
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline hands the read deadlines over to the caller.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.handedOver.Store(true)
	return c.Conn.SetReadDeadline(t)
}

// Buffered reports whether bytes of the client's wait in the read-ahead,
// read from the socket but not yet handed out: a wait for the socket to
// become readable would miss them.
func (c *Conn) Buffered() bool { return c.ahead != nil }

// Close closes the connection and frees its place under MD_MAX_CONNS, once.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.onClose()
		if fn := c.also.Load(); fn != nil {
			(*fn)()
		}
	})
	return err
}

// OnClose makes fn run when the node's connection c closes, whatever
// ends it (a hijack handler that returns, or an upgrade whose answer could
// not be written, so that the handler never ran); false when c is not one
// of the node's connections (fn is then the caller's to run).
func OnClose(c net.Conn, fn func()) bool {
	ec, ok := c.(*Conn)
	if !ok {
		return false
	}
	ec.also.Store(&fn)
	return true
}

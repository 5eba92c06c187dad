package api

import (
	"bufio"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/marketdata/marketdata/api/edge"
	"github.com/marketdata/marketdata/api/stream"
)

// streamNotSentLowat bounds the bytes of a stream that wait unsent in the
// kernel (TCP_NOTSENT_LOWAT): past it the writer waits in the node, where a
// market's newer version replaces the older one (conflation), instead of
// queueing both in a socket buffer that may grow to megabytes. 16 KiB is
// about 50 price messages: far more than a client that keeps up needs.
const streamNotSentLowat = 16 << 10

// tuneStreamSocket sets TCP_NOTSENT_LOWAT on a stream's connection
// (best effort: a connection that is not TCP keeps its defaults).
func tuneStreamSocket(c net.Conn) {
	if ec, ok := c.(*edge.Conn); ok {
		c = ec.Conn
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) { //nolint:errcheck // best effort, as said
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, streamNotSentLowat) //nolint:errcheck // as said
	})
}

// streamInput is a stream's socket as its wait for the client uses it
// (stream.Input): bytes buffered already (the WebSocket reader's br, the
// connection's read-ahead) need no wait; else it waits in the runtime's
// poller until the socket is readable, which a one-byte peek that does not
// block tells first (a wait without that check could miss bytes that came
// before it began). The read deadline bounds it, and a cut ends it. Only
// the stream's serving goroutine uses it, between reads.
type streamInput struct {
	br   *bufio.Reader
	ec   *edge.Conn
	raw  syscall.RawConn
	peek []byte
	n    int
	err  error
}

// newStreamInput is nil when the connection is not TCP: the read then
// waits itself.
func newStreamInput(nc net.Conn, br *bufio.Reader) stream.Input {
	ec, _ := nc.(*edge.Conn)
	if ec != nil {
		nc = ec.Conn
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok || br == nil {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &streamInput{br: br, ec: ec, raw: raw}
}

// buffered: bytes wait above the socket.
func (in *streamInput) buffered() bool {
	return in.br.Buffered() > 0 || in.ec != nil && in.ec.Buffered()
}

func (in *streamInput) Wait() error {
	if in.buffered() {
		return nil
	}
	return in.raw.Read(in.readable)
}

// readable peeks at one byte without blocking: data, the end, or an error
// (EINTR too: the read will tell) make a read worth doing.
func (in *streamInput) readable(fd uintptr) bool {
	var b [1]byte
	_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err != unix.EAGAIN
}

func (in *streamInput) Peek(p []byte) int {
	if in.buffered() {
		return 0
	}
	in.peek, in.n = p, 0
	in.raw.Read(in.peekFn) //nolint:errcheck // nothing peeked is the answer
	in.peek = nil
	return in.n
}

func (in *streamInput) peekFn(fd uintptr) bool {
	n, _, err := unix.Recvfrom(int(fd), in.peek, unix.MSG_PEEK|unix.MSG_DONTWAIT)
	if err == nil {
		in.n = n
	}
	return true
}

func (in *streamInput) Discard(n int) error {
	var b [256]byte
	for n > 0 {
		in.peek, in.n, in.err = b[:min(n, len(b))], 0, nil
		if err := in.raw.Read(in.takeFn); err != nil {
			return err
		}
		if in.err != nil {
			return in.err
		}
		if in.n == 0 {
			return io.ErrUnexpectedEOF
		}
		n -= in.n
	}
	in.peek = nil
	return nil
}

func (in *streamInput) takeFn(fd uintptr) bool {
	in.n, _, in.err = unix.Recvfrom(int(fd), in.peek, unix.MSG_DONTWAIT)
	return true
}

// streamOutput is a stream's socket as the fan-out workers write to it
// (stream.Output): a write(2) on the non-blocking socket, under the
// connection's write lock (RawConn.Write), that never waits for room: the
// writer goroutine does that (stream.Conn.writeNow). Only the stream's
// writer uses it, one at a time.
type streamOutput struct {
	raw syscall.RawConn
	b   []byte
	n   int
	err error
}

// newStreamOutput is nil when the connection is not TCP: the stream's
// writes then all go through its writer goroutine.
func newStreamOutput(nc net.Conn) stream.Output {
	if ec, ok := nc.(*edge.Conn); ok {
		nc = ec.Conn
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &streamOutput{raw: raw}
}

func (o *streamOutput) TryWrite(b []byte) (int, error) {
	o.b, o.n, o.err = b, 0, nil
	err := o.raw.Write(o.writeFn)
	o.b = nil
	if err != nil {
		return o.n, err
	}
	return o.n, o.err
}

// writeFn writes until the socket is full; it never asks the poller to
// wait (true).
func (o *streamOutput) writeFn(fd uintptr) bool {
	for o.n < len(o.b) {
		n, err := unix.Write(int(fd), o.b[o.n:])
		if n > 0 {
			o.n += n
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true
		case err != nil:
			o.err = err
			return true
		case n <= 0:
			return true
		}
	}
	return true
}

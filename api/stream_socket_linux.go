package api

import (
	"bufio"
	"net"

	"golang.org/x/sys/unix"
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
	if ec, ok := c.(*edgeConn); ok {
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

// inputWait is a stream's wait for its client's next bytes (stream.Conn.
// SetInputWait): bytes buffered already (the WebSocket reader's br, the
// connection's read-ahead) need none; else it waits in the runtime's
// poller until the socket is readable, which a one-byte peek that does not
// block tells (a wait without that check could miss bytes that came
// before it began). The read deadline bounds it, and a cut ends it. nil
// when the connection is not TCP: the read then waits itself.
func inputWait(nc net.Conn, br *bufio.Reader) func() error {
	ec, _ := nc.(*edgeConn)
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
	var peek [1]byte
	readable := func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), peek[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return err != unix.EAGAIN // data, the end, or an error (EINTR too): the read will tell
	}
	return func() error {
		if br.Buffered() > 0 || ec != nil && ec.ahead != nil {
			return nil
		}
		return raw.Read(readable)
	}
}

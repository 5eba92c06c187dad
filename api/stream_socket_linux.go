package api

import (
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

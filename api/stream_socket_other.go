//go:build !linux

package api

import (
	"bufio"
	"net"
)

// tuneStreamSocket keeps the system's defaults where TCP_NOTSENT_LOWAT is
// not known (stream_socket_linux.go).
func tuneStreamSocket(net.Conn) {}

// inputWait is nil where the socket cannot be peeked at
// (stream_socket_linux.go): a stream's read waits itself.
func inputWait(net.Conn, *bufio.Reader) func() error { return nil }

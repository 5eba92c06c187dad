//go:build !linux

package api

import (
	"bufio"
	"net"

	"github.com/marketdata/marketdata/api/stream"
)

// tuneStreamSocket keeps the system's defaults where TCP_NOTSENT_LOWAT is
// not known (stream_socket_linux.go).
func tuneStreamSocket(net.Conn) {}

// newStreamInput is nil where the socket cannot be peeked at
// (stream_socket_linux.go): a stream's read waits itself.
func newStreamInput(net.Conn, *bufio.Reader) stream.Input { return nil }

// newStreamOutput is nil where the socket is not known
// (stream_socket_linux.go): a stream's writes go through its writer
// goroutine.
func newStreamOutput(net.Conn) stream.Output { return nil }

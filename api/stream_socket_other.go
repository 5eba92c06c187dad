//go:build !linux

package api

import "net"

// tuneStreamSocket keeps the system's defaults where TCP_NOTSENT_LOWAT is
// not known (stream_socket_linux.go).
func tuneStreamSocket(net.Conn) {}

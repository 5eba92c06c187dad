package api

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestEdgeConnReadAhead: a one-byte read (fasthttp's wait for the next
// request) brings the rest of what the client sent in the same read; the
// reads after it get those bytes first, in order, then the connection's;
// once drained, the connection holds no buffer.
func TestEdgeConnReadAhead(t *testing.T) {
	client, raw := loopbackPair(t)
	c := newEdgeConn(raw, 10*time.Second, time.Minute, func() {})
	defer c.Close() //nolint:errcheck // the test is over

	first := bytes.Repeat([]byte("GET /public/v1/key HTTP/1.1\r\nHost: x\r\n\r\n"), 3) // pipelined
	if _, err := client.Write(first); err != nil {
		t.Fatal(err)
	}
	var got []byte
	one := make([]byte, 1)
	aheadUsed := false
	// The client's bytes may reach the socket in more than one piece:
	// read until all of them came.
	for len(got) < len(first) {
		if _, err := io.ReadFull(c, one); err != nil {
			t.Fatal(err)
		}
		got = append(got, one...)
		if c.ahead == nil {
			continue
		}
		aheadUsed = true
		buf := make([]byte, 7) // fasthttp's reader fills in pieces
		for c.ahead != nil {
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:n]...)
		}
	}
	if !bytes.Equal(got, first) {
		t.Fatalf("read %q, want %q", got, first)
	}
	if c.ahead != nil {
		t.Fatal("the drained read-ahead buffer is still held")
	}
	if !aheadUsed {
		t.Fatal("no one-byte read brought more than its byte (one write of 120 bytes on loopback arrives whole)")
	}
	// Then the connection itself: a read of a full buffer passes through.
	if _, err := client.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "more" {
		t.Fatalf("next read: %q %v, want \"more\"", buf[:n], err)
	}
}

// loopbackPair is a TCP connection on loopback: the client's end and the
// server's; both are closed when the test ends.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

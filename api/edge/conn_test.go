package edge

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestEdgeConnReadAhead: a one-byte read (fasthttp's wait for the next
// request) brings the rest of what the client sent in the same read; the
// reads after it get those bytes first, in order, then the connection's;
// once drained, the connection holds no buffer.
func TestEdgeConnReadAhead(t *testing.T) {
	client, raw := testenv.LoopbackPair(t)
	c := newConn(raw, 10*time.Second, time.Minute, func() {})
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
		if !c.Buffered() {
			continue
		}
		aheadUsed = true
		buf := make([]byte, 7) // fasthttp's reader fills in pieces
		for c.Buffered() {
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
	if c.Buffered() || c.ahead != nil {
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

// TestEdgeConnDeadlines: an idle wait that runs out reads as the client
// closing (io.EOF); a request begun and not finished runs out with the
// timeout error; an answer done (StateIdle) starts the idle wait again.
func TestEdgeConnDeadlines(t *testing.T) {
	client, raw := testenv.LoopbackPair(t)
	c := newConn(raw, 100*time.Millisecond, 50*time.Millisecond, func() {})
	buf := make([]byte, 64)
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("idle read: %v, want io.EOF", err)
	}
	ConnState(c, fasthttp.StateIdle)
	if _, err := client.Write([]byte("G")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf); n != 1 || err != nil {
		t.Fatalf("first byte: %d %v", n, err)
	}
	start := time.Now()
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("partial request: %v, want the deadline's error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the request deadline ran out after %s, want about 100 ms", d)
	}
	// Pipelining: fasthttp says StateActive for a request it buffered.
	ConnState(c, fasthttp.StateIdle)
	ConnState(c, fasthttp.StateActive)
	if !c.inRequest {
		t.Error("StateActive after an answer did not start the request deadline")
	}
	ConnState(client, fasthttp.StateActive) // not a Conn: ignored
}

// TestEdgeConnHandOver: a read deadline set by someone else (a hijacking
// handler) takes the deadlines over; OnClose hooks run once at close.
func TestEdgeConnHandOver(t *testing.T) {
	client, raw := testenv.LoopbackPair(t)
	closes, hooks := 0, 0
	c := newConn(raw, 50*time.Millisecond, 50*time.Millisecond, func() { closes++ })
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ConnState(c, fasthttp.StateIdle) // handed over: the edge sets no deadline
	if c.answered {
		t.Error("the edge still follows the requests of a connection handed over")
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := c.Read(buf); n != 1 || err != nil {
		t.Fatalf("read after hand-over: %d %v, want the byte", n, err)
	}
	if !OnClose(c, func() { hooks++ }) || OnClose(client, func() {}) {
		t.Error("OnClose: want true for the edge's connection only")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close() //nolint:errcheck // a second close fails; what matters is that the hooks do not run again
	if closes != 1 || hooks != 1 {
		t.Errorf("after two closes: onClose ran %d times, the hook %d; want 1 each", closes, hooks)
	}
}

// TestEdgeConnSmallReads: a short read that brings no more than it asked
// for holds no buffer; fasthttp's one-byte wait for the next request ends
// quietly (io.EOF) when the idle timeout runs out, and so when the client
// closes.
func TestEdgeConnSmallReads(t *testing.T) {
	client, raw := testenv.LoopbackPair(t)
	c := newConn(raw, 10*time.Second, 50*time.Millisecond, func() {})
	defer c.Close() //nolint:errcheck // the test is over
	one := make([]byte, 1)
	if n, err := c.Read(one); n != 0 || err != io.EOF {
		t.Fatalf("one-byte idle read: %d %v, want io.EOF", n, err)
	}
	ConnState(c, fasthttp.StateIdle)
	if _, err := client.Write([]byte("G")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(one); n != 1 || err != nil || one[0] != 'G' {
		t.Fatalf("one-byte read of one byte: %d %q %v", n, one[:n], err)
	}
	if c.Buffered() {
		t.Error("a read that brought only its byte holds a buffer")
	}
	ConnState(c, fasthttp.StateIdle)
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(one); n != 0 || err != io.EOF {
		t.Fatalf("one-byte read after the client closed: %d %v, want io.EOF", n, err)
	}
}

// TestEdgeConnActiveBeforeFirstRequest: fasthttp may say StateActive on a
// new connection before any byte arrived; that starts no request, so the
// idle wait still ends quietly rather than as a request timeout.
func TestEdgeConnActiveBeforeFirstRequest(t *testing.T) {
	_, raw := testenv.LoopbackPair(t)
	c := newConn(raw, 10*time.Second, 50*time.Millisecond, func() {})
	defer c.Close() //nolint:errcheck // the test is over
	ConnState(c, fasthttp.StateActive)
	if c.inRequest {
		t.Fatal("StateActive before any byte started a request")
	}
	start := time.Now()
	if _, err := c.Read(make([]byte, 64)); err != io.EOF {
		t.Fatalf("idle read: %v, want io.EOF", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the idle wait ended after %s, want about 50 ms (the request timeout is 10 s)", d)
	}
}

package api_test

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// An idle stream's goroutine waits for its client outside the WebSocket
// library's read (stream.Conn.SetInputWait): a shallow wait keeps its
// stack at the runtime's smallest, where a wait inside the read, after a
// command's handling grew the stack, kept 8 KiB a connection (the idle
// connection's memory, docs/benchmarks.md). Commands still work after the
// wait: each idle stream takes a second subscribe.
func TestIdleStreamWaitsOutsideTheRead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the input wait peeks at the socket with MSG_PEEK (linux)")
	}
	_, nodes, secret, _ := streamWorld(t, 2, 1)
	const streams = 6
	var clients []*wsClient
	for range streams {
		c := nodes[0].mustDial(t, secret)
		c.subscribe("s000")
		c.expect("subscribed")
		c.expect("price")
		clients = append(clients, c)
	}
	var waiting, reading int
	deadline := time.Now().Add(5 * time.Second)
	for {
		waiting, reading = serveWaits()
		if waiting == streams && reading == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if waiting != streams || reading != 0 {
		t.Fatalf("idle streams: %d serving goroutines wait in the input wait, %d inside the WebSocket read; want %d and 0",
			waiting, reading, streams)
	}
	for _, c := range clients {
		c.subscribe("s001")
		c.expect("subscribed")
		c.expect("price")
	}
}

// serveWaits counts the goroutines running stream.Conn.Serve that wait in
// the input wait (the runtime poller, under RawConn.Read) and those that
// wait inside the WebSocket library's read.
func serveWaits() (waiting, reading int) {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 2) //nolint:errcheck // a bytes.Buffer does not fail
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		if !hasFrame(g, "api/stream.(*Conn).Serve(") {
			continue
		}
		switch {
		case hasFrame(g, "websocket.(*Conn).ReadMessage("):
			reading++
		case hasFrame(g, "internal/poll.(*FD).RawRead("):
			waiting++
		}
	}
	return waiting, reading
}

// hasFrame reports whether goroutine dump g has a frame (not its "created
// by" line) whose function contains fn.
func hasFrame(g, fn string) bool {
	for line := range strings.SplitSeq(g, "\n") {
		if !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "created by") && strings.Contains(line, fn) {
			return true
		}
	}
	return false
}

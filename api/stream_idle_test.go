package api_test

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/marketdata/marketdata/api/stream"
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
	idleThenSubscribe(t, "idle streams", clients)
}

// idleThenSubscribe asserts that every client's stream waits in the input
// wait and none reads a message, then that each still takes a command.
func idleThenSubscribe(t *testing.T, what string, clients []*wsClient) {
	t.Helper()
	if waiting, reading := untilWaiting(len(clients)); waiting != len(clients) || reading != 0 {
		t.Fatalf("%s: %d serving goroutines wait in the input wait, %d reading a message; want %d and 0",
			what, waiting, reading, len(clients))
	}
	for _, c := range clients {
		c.subscribe("s001")
		c.expect("subscribed")
		c.expect("price")
	}
}

// serveWaits counts the goroutines running stream.Conn.Serve that wait in
// the input wait (the runtime poller, under RawConn.Read), and the
// goroutines reading a message (stream.Conn.readOne, inside the WebSocket
// library's read).
func serveWaits() (waiting, reading int) {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 2) //nolint:errcheck // a bytes.Buffer does not fail
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		switch {
		case hasFrame(g, "api/stream.(*Conn).readOne("):
			reading++
		case hasFrame(g, "api/stream.(*Conn).Serve(") && hasFrame(g, "internal/poll.(*FD).RawRead("):
			waiting++
		}
	}
	return waiting, reading
}

// untilWaiting polls until n serving goroutines wait in the input wait and
// none reads a message (5 s at most), and returns what it saw last.
func untilWaiting(n int) (waiting, reading int) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		waiting, reading = serveWaits()
		if waiting == n && reading == 0 || time.Now().After(deadline) {
			return waiting, reading
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pings and pongs are taken in the input wait: the WebSocket library's
// read does not return for a control frame, so a pong read there would
// leave a goroutine in the read (its stack grown) until the next command —
// every idle stream, 15 s after it opened. Here the node pings every
// 250 ms and gives up after 3 s without a pong; the clients answer the
// pings and ping the node themselves.
func TestIdleStreamTakesPingsAndPongsInTheWait(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the input wait peeks at the socket with MSG_PEEK (linux)")
	}
	_, nodes, secret, _ := streamWorld(t, 2, 1, withStream(func(c *stream.Config) {
		c.PingEvery, c.PongWait = 200*time.Millisecond, 3*time.Second
	}))
	const streams = 4
	var pongs atomic.Int64
	var clients []*wsClient
	for range streams {
		c := nodes[0].mustDial(t, secret)
		c.c.SetPongHandler(func(string) error { pongs.Add(1); return nil }) // before the client's reads start
		c.subscribe("s000")
		c.expect("subscribed")
		c.expect("price")
		clients = append(clients, c)
	}
	for _, c := range clients {
		if err := c.c.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// Past the pong wait: a stream lives on only if each pong it got moved
	// its read deadline.
	time.Sleep(4 * time.Second)
	if got := pongs.Load(); got < streams {
		t.Errorf("the clients' pings got %d pongs; want %d", got, streams)
	}
	idleThenSubscribe(t, "after pings and pongs", clients)
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

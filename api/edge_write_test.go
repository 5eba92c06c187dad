package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// countingListener counts the Write calls made to the connections it
// accepted, at their start (a client that read a whole answer has seen
// every call that wrote it begin).
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.l.writes.Add(1)
	return c.Conn.Write(b)
}

// An answer bigger than Fiber's default 4 KiB write buffer (a 50-id
// snapshot) leaves the node in one write(2): with that buffer it took two,
// which was a sixth of the snapshot's cost (docs/benchmarks.md, "one write
// an answer").
func TestBigAnswerIsOneWrite(t *testing.T) {
	var cl *countingListener
	w := newWorld(t, withIngest())
	n := w.node(t, withListener(func(ln net.Listener) net.Listener {
		cl = &countingListener{Listener: ln}
		return cl
	}))
	streamFixture(t, w, 50)
	secret, _ := streamSecret(t, w)
	ids := make([]string, 50)
	for i := range ids {
		ids[i] = streamMarket(i)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(n.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := cl.writes.Load()
	if _, err := fmt.Fprintf(c, "GET /public/v1/prices/snapshot?ids=%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n",
		strings.Join(ids, ","), secret); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(body) < 8<<10 {
		t.Fatalf("snapshot: %d with %d bytes; want a 200 of more than 8 KiB", resp.StatusCode, len(body))
	}
	if got := cl.writes.Load() - before; got != 1 {
		t.Fatalf("a %d-byte answer took %d writes; want 1", len(body), got)
	}
}

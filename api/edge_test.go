package api_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/api/edge"
)

// dial opens a raw connection to the node, closed when the test ends.
func (n *node) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(n.base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", n.base, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawAnswer is one answer read off a raw connection.
type rawAnswer struct {
	answer
	close bool // the node said Connection: close
}

// readAnswer reads one HTTP answer from br within wait.
func readAnswer(c net.Conn, br *bufio.Reader, wait time.Duration) (rawAnswer, error) {
	c.SetReadDeadline(time.Now().Add(wait)) //nolint:errcheck // the read reports it
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return rawAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawAnswer{}, err
	}
	return rawAnswer{answer{status: resp.StatusCode, header: resp.Header, body: body}, resp.Close}, nil
}

// send writes raw on c and reads the answer (up to 10 s).
func send(t *testing.T, c net.Conn, br *bufio.Reader, raw string) rawAnswer {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	a, err := readAnswer(c, br, 10*time.Second)
	if err != nil {
		t.Fatalf("no answer to %.60q: %v", raw, err)
	}
	return a
}

// wantClosedQuietly waits (up to 10 s) for the node to close c without
// writing anything.
func wantClosedQuietly(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a conn that cannot take a deadline fails the read below
	b, err := io.ReadAll(br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after 10 s (read %q)", b)
	}
	if len(b) != 0 {
		t.Errorf("the node wrote %q before closing, want nothing", b)
	}
}

func keyRequest(secret, extra string) string {
	return "GET /public/v1/key HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + "\r\n" + extra + "\r\n"
}

// TestEdgeMalformedRequests: a request the parser cannot read answers 400
// invalid_request with a fixed message, headers over 16 KiB answer 431;
// neither the secret nor any byte of the request line reaches the answer
// or the node's log. 16 KiB of request line and headers is still read.
func TestEdgeMalformedRequests(t *testing.T) {
	w := newWorld(t)
	n := w.node(t)
	secret, _ := w.newKey(t, keyOpts{})
	const marker = "zqmarker7731"
	line := "GET /public/v1/key?" + marker + "=1 HTTP/1.1\r\n"
	auth := "Authorization: Bearer " + secret + "\r\n"
	pad := func(total int, head string) string { // head + X-Pad header up to total bytes incl. the blank line
		return head + "X-Pad: " + strings.Repeat("p", total-len(head)-len("X-Pad: \r\n\r\n")) + "\r\n\r\n"
	}
	cases := []struct {
		name   string
		raw    string
		status int
		msg    string
	}{
		{"negative content length", line + "Host: x\r\n" + auth + "Content-Length: -1\r\n\r\n", 400, "could not be read"},
		{"header without colon", line + "Host: x\r\nX-Broken-Header-Line\r\n" + auth + "\r\n", 400, "could not be read"},
		{"space in header name", line + "Host: x\r\n" + auth + "Bad Name: 1\r\n\r\n", 400, "could not be read"},
		{"request line without target", "GET\r\nX-Marker: " + marker + "\r\n" + auth + "\r\n", 400, "could not be read"},
		{"no method", " /public/v1/key?" + marker + " HTTP/1.1\r\n" + auth + "\r\n", 400, "could not be read"},
		{"NUL in request target", "GET /public/v1/key?" + marker + "\x00 HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", 400, "could not be read"},
		{"NUL in header value", line + "Host: x\r\n" + auth + "X-Nul: a\x00b\r\n\r\n", 400, "could not be read"},
		{"NUL with a request id", line + "Host: x\r\n" + auth + "X-Request-Id: " + marker + "\r\nX-Nul: a\x00b\r\n\r\n", 400, "could not be read"},
		{"NUL in header name", line + "Host: x\r\n" + auth + "X-N\x00ul: 1\r\n\r\n", 400, "could not be read"},
		{"bad content length", line + "Host: x\r\n" + auth + "Content-Length: 12ab\r\n\r\n", 400, "could not be read"},
		{"bad chunk size", line + "Host: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "could not be read"},
		{"headers over 16 KiB", pad(edge.MaxHeaderBytes+1024, line+"Host: x\r\n"+auth), 431, "exceed 16 KiB"},
		{"headers just over 16 KiB", pad(edge.MaxHeaderBytes+1, line+"Host: x\r\n"+auth), 431, "exceed 16 KiB"},
		{"body too large", line + "Host: x\r\n" + auth + "Content-Length: 99999999\r\n\r\n", 413, "too large"},
		{"HTTP/9.9", strings.Replace(line, "HTTP/1.1", "HTTP/9.9", 1) + "Host: x\r\n" + auth + "\r\n", 505, "version is not supported"},
		{"HTTP/2.0 as text", strings.Replace(line, "HTTP/1.1", "HTTP/2.0", 1) + "Host: x\r\n" + auth + "\r\n", 505, "version is not supported"},
		{"HTTP/0.9", strings.Replace(line, "HTTP/1.1", "HTTP/0.9", 1) + "Host: x\r\n" + auth + "\r\n", 505, "version is not supported"},
		{"HTTP/1.2", strings.Replace(line, "HTTP/1.1", "HTTP/1.2", 1) + "Host: x\r\n" + auth + "\r\n", 505, "version is not supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := n.dial(t)
			a := send(t, c, bufio.NewReader(c), tc.raw)
			wantError(t, a.answer, tc.status, "invalid_request", tc.msg)
			if !a.close {
				t.Errorf("no Connection: close after a request that could not be read")
			}
			for _, leak := range []string{secret, secret[len("mdk_live_"):20], marker, "Bearer"} {
				if bytes.Contains(a.body, []byte(leak)) {
					t.Errorf("body %s echoes %q of the request", a.body, leak)
				}
				for k, vs := range a.header {
					if strings.Contains(k+strings.Join(vs, ","), leak) {
						t.Errorf("header %s: %q echoes %q of the request", k, vs, leak)
					}
				}
			}
		})
	}
	// 16 KiB of request line and headers, blank line included, is read.
	c := n.dial(t)
	a := send(t, c, bufio.NewReader(c), pad(edge.MaxHeaderBytes, line+"Host: x\r\n"+auth))
	wantOK(t, a.answer)
	// HTTP/1.0 is still answered.
	c = n.dial(t)
	a = send(t, c, bufio.NewReader(c), strings.Replace(line, "HTTP/1.1", "HTTP/1.0", 1)+"Host: x\r\n"+auth+"\r\n")
	wantOK(t, a.answer)
	for _, leak := range []string{secret, marker} {
		if strings.Contains(n.logs.String(), leak) {
			t.Errorf("node log holds %q of a request:\n%.3000s", leak, n.logs.String())
		}
	}
}

// TestEdgePartialRequest: a request not received in full within the request
// timeout of its first byte is answered 408 (or closed), also when it
// trickles in a byte at a time.
func TestEdgePartialRequest(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, withTimeouts(time.Second, time.Minute))
	secret, _ := w.newKey(t, keyOpts{})

	c := n.dial(t)
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET /public/v1/key HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+secret+"\r\n"); err != nil {
		t.Fatal(err)
	}
	a, err := readAnswer(c, br, 10*time.Second)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("partial request: %v, want a 408 or a close within 10 s", err)
	}
	if err == nil {
		wantError(t, a.answer, http.StatusRequestTimeout, "invalid_request", "in time")
		if bytes.Contains(a.body, []byte(secret)) {
			t.Errorf("408 body echoes the secret: %s", a.body)
		}
	}

	// A client that trickles its request never extends the deadline.
	c = n.dial(t)
	br = bufio.NewReader(c)
	got := make(chan error, 1)
	go func() {
		_, err := readAnswer(c, br, 20*time.Second)
		got <- err
	}()
	req := keyRequest(secret, "X-Slow: "+strings.Repeat("s", 400)+"\r\n")
	deadline := time.After(15 * time.Second)
	for i := 0; ; i++ {
		select {
		case err := <-got:
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("trickled request: %v", err)
			}
			if i >= len(req) {
				t.Fatalf("the whole trickled request was sent before the node ended it")
			}
			return
		case <-deadline:
			t.Fatalf("a request trickled in for 15 s is still open (request timeout 1 s)")
		case <-time.After(50 * time.Millisecond):
		}
		if i < len(req) {
			c.Write([]byte{req[i]}) //nolint:errcheck // the node may have closed
		}
	}
}

// TestEdgeIdleConnections: a connection between requests outlives the
// request timeout and is closed quietly (no unasked 408) after the idle
// timeout, before its first request as after one.
func TestEdgeIdleConnections(t *testing.T) {
	w := newWorld(t)
	// The idle wait is long enough for two requests and a request timeout
	// on two busy cores; wantClosedQuietly waits 10 s for its end.
	n := w.node(t, withTimeouts(500*time.Millisecond, 6*time.Second))
	secret, _ := w.newKey(t, keyOpts{})

	kept := n.dial(t)
	keptBr := bufio.NewReader(kept)
	fresh := n.dial(t)
	freshBr := bufio.NewReader(fresh)
	wantOK(t, send(t, kept, keptBr, keyRequest(secret, "")).answer)
	// A request timeout passes (a partial request started now is ended):
	// longer than the request timeout, shorter than the idle one, both
	// connections are still usable.
	probe := n.dial(t)
	if _, err := io.WriteString(probe, "GET /public/v1/key HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	probe.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // the read reports it
	if _, err := io.ReadAll(probe); err != nil {
		t.Fatalf("partial request not ended within 10 s (request timeout 500 ms): %v", err)
	}
	wantOK(t, send(t, kept, keptBr, keyRequest(secret, "")).answer)
	wantOK(t, send(t, fresh, freshBr, keyRequest(secret, "")).answer)

	silent := n.dial(t)
	for _, c := range []struct {
		name string
		c    net.Conn
		br   *bufio.Reader
	}{{"after requests", kept, keptBr}, {"before any request", silent, bufio.NewReader(silent)}} {
		t.Run(c.name, func(t *testing.T) { wantClosedQuietly(t, c.c, c.br) })
	}
}

// TestEdgeMaxConns: with MaxConns open connections the node accepts no more
// (a new client waits); when one closes, the waiting one is served.
func TestEdgeMaxConns(t *testing.T) {
	w := newWorld(t)
	const max = 5
	n := w.node(t, withMaxConns(max))
	secret, _ := w.newKey(t, keyOpts{})
	w.client.CloseIdleConnections() // the harness's first request holds a connection

	conns := make([]net.Conn, max)
	for i := range conns {
		conns[i] = n.dial(t)
		// Each is served: the harness's connection, once closed, frees its place.
		wantOK(t, send(t, conns[i], bufio.NewReader(conns[i]), keyRequest(secret, "")).answer)
	}
	extra := n.dial(t) // the kernel completes the handshake; the node does not accept it
	extraBr := bufio.NewReader(extra)
	if _, err := io.WriteString(extra, keyRequest(secret, "")); err != nil {
		t.Fatal(err)
	}
	if a, err := readAnswer(extra, extraBr, time.Second); err == nil {
		t.Fatalf("connection %d answered %d while %d were open, want it to wait", max+1, a.status, max)
	}
	conns[0].Close()
	a, err := readAnswer(extra, extraBr, 10*time.Second)
	if err != nil {
		t.Fatalf("waiting connection not served after one closed: %v", err)
	}
	wantOK(t, a.answer)
	if !strings.Contains(n.logs.String(), "MD_MAX_CONNS") {
		t.Errorf("no log line about MD_MAX_CONNS:\n%.2000s", n.logs.String())
	}
}

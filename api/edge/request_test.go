package edge

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestReadError: each parser error maps to its status and a fixed message
// that quotes nothing of the request.
func TestReadError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		reason string
	}{
		{&fasthttp.ErrSmallBuffer{}, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large"},
		{fmt.Errorf("read body: %w", fasthttp.ErrBodyTooLarge), http.StatusRequestEntityTooLarge, "body_too_large"},
		{fmt.Errorf("read: %w", os.ErrDeadlineExceeded), http.StatusRequestTimeout, "timeout"},
		{fmt.Errorf("cannot parse %q", "Authorization: Bearer secret"), http.StatusBadRequest, "malformed"},
	} {
		status, msg, reason := ReadError(tc.err)
		if status != tc.status || reason != tc.reason || msg == "" || strings.Contains(msg, "secret") {
			t.Errorf("ReadError(%v) = %d %q %q, want %d %q and a fixed message", tc.err, status, msg, reason, tc.status, tc.reason)
		}
	}
}

// TestRefuse: requests the parser reads but HTTP forbids are refused, and
// only those. A request read off the wire is refused by Refuse or, if the
// parser itself refuses it, answered by ReadError: either way with the
// status wanted.
func TestRefuse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		raw    string
		status int // 0: passes
	}{
		{"HTTP/1.1", "GET /a?b=c HTTP/1.1\r\nHost: x\r\nX-Tab: a\tb\r\n\r\n", 0},
		{"HTTP/1.0", "GET /a HTTP/1.0\r\nHost: x\r\n\r\n", 0},
		{"HTTP/9.9", "GET /a HTTP/9.9\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		{"HTTP/1.2", "GET /a HTTP/1.2\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		{"HTTP/2.0", "GET /a HTTP/2.0\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		{"space in a header name", "GET /a HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", http.StatusBadRequest},
		{"DEL in a value", "GET /a HTTP/1.1\r\nHost: x\r\nX-Del: a\x7fb\r\n\r\n", http.StatusBadRequest},
		{"NUL in a value", "GET /a HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n", http.StatusBadRequest},
		{"NUL in the target", "GET /a\x00b HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"not a token", "GET /a HTTP/1.1\r\nHost: x\r\nX(y): 1\r\n\r\n", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req fasthttp.Request
			if err := req.Read(bufio.NewReader(strings.NewReader(tc.raw))); err != nil {
				if status, _, _ := ReadError(err); tc.status == 0 || status != tc.status {
					t.Fatalf("the parser refused it (%v), answered %d; want %d", err, status, tc.status)
				}
				return
			}
			status, msg, ok := Refuse(&req)
			if ok != (tc.status == 0) || status != tc.status || (!ok && msg == "") {
				t.Errorf("Refuse = %d %q %v, want status %d", status, msg, ok, tc.status)
			}
		})
	}
}

// TestRefuseControlBytes: control bytes in the method, the target or a
// header value are refused 400 whichever parser let them through (the
// parser of this fasthttp refuses most itself: these requests are built,
// not read).
func TestRefuseControlBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(*fasthttp.Request)
	}{
		{"NUL in a header value", func(r *fasthttp.Request) { r.Header.Set("X-Nul", "a\x00b") }},
		{"DEL in a header value", func(r *fasthttp.Request) { r.Header.Set("X-Del", "a\x7fb") }},
		{"ESC in a header value", func(r *fasthttp.Request) { r.Header.Set("X-Esc", "a\x1bb") }},
		{"control byte in the target", func(r *fasthttp.Request) { r.Header.SetRequestURI("/a\x01b") }},
		{"control byte in the method", func(r *fasthttp.Request) { r.Header.SetMethod("G\x01T") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req fasthttp.Request
			req.Header.SetRequestURI("/a")
			req.Header.Set("Host", "x")
			if _, _, ok := Refuse(&req); !ok {
				t.Fatal("the clean request is refused")
			}
			tc.build(&req)
			status, msg, ok := Refuse(&req)
			if ok || status != http.StatusBadRequest || msg != msgUnreadable {
				t.Errorf("Refuse = %d %q %v, want 400 %q", status, msg, ok, msgUnreadable)
			}
		})
	}
}

func TestIsToken(t *testing.T) {
	for s, want := range map[string]bool{"": false, "X-Ok": true, "a!#$%&'*+-.^_`|~9": true, "Bad Name": false, "x:y": false} {
		if got := isToken([]byte(s)); got != want {
			t.Errorf("isToken(%q) = %v, want %v", s, got, want)
		}
	}
}

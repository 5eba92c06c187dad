package api_test

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// wantEndedInTime waits up to 10 s for the node to end a request left
// unfinished: a 408 or a close. The request timeout is 1 s and the idle
// wait a minute, so an answer within 10 s is the request deadline's.
func wantEndedInTime(t *testing.T, what string, a rawAnswer, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%s: %v, want a 408 or a close within 10 s (request timeout 1 s)", what, err)
	}
	if err == nil {
		wantError(t, a.answer, http.StatusRequestTimeout, "invalid_request", "in time")
	}
}

// TestEdgeContinueKeepsRequestDeadline: the interim "100 Continue" the node
// writes before a body does not end the request: a client that never sends
// the body is still ended by the request deadline, not the idle wait.
func TestEdgeContinueKeepsRequestDeadline(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, withTimeouts(time.Second, time.Minute))
	secret, _ := w.newKey(t, keyOpts{})

	c := n.dial(t)
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, keyRequest(secret, "Expect: 100-continue\r\nContent-Length: 10\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // the read reports it
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no interim answer: %v", err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("got %q, want HTTP/1.1 100 Continue", line)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after the interim status line: %q, %v", blank, err)
	}
	a, err := readAnswer(c, br, 10*time.Second)
	wantEndedInTime(t, "body never sent after 100 Continue", a, err)
}

// TestEdgePipelinedPartialRequest: a request that arrived with the previous
// one (pipelined), and stays incomplete, is ended by the request deadline:
// writing the previous answer (here over 4 KiB, so fasthttp writes part of
// it before the request is done) does not put it on the idle wait.
func TestEdgePipelinedPartialRequest(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, withTimeouts(time.Second, time.Minute))

	c := n.dial(t)
	if a := send(t, c, bufio.NewReader(c), "GET /public/v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"); len(a.body) <= 8<<10 {
		t.Fatalf("the OpenAPI document is %d bytes, want over 8 KiB (two write buffers)", len(a.body))
	}
	c = n.dial(t)
	req := "GET /public/v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\nGET /public/v1/openapi.json HTTP/1.1\r\nHost: x\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // the read reports it
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("pipelined partial request still open after 10 s (request timeout 1 s): %v; read %d bytes", err, len(b))
	}
}

// TestEdgePipelinedRequestsAllAnswered: complete requests sent in one write
// (HTTP/1.1 pipelining) each get their whole answer, in order, at once —
// small answers that fit the write buffer and large ones alike. fasthttp
// 1.51 with ReduceMemoryUsage put an unflushed answer back in its pool when
// another request followed (valyala/fasthttp#1672): the client got one
// answer and waited for the idle close.
func TestEdgePipelinedRequestsAllAnswered(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, withTimeouts(time.Second, time.Minute))
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/public/v1/key", http.StatusUnauthorized}, // no key: a small error answer
		{"/nothing", http.StatusNotFound},           // outside the API
		{"/public/v1/openapi.json", http.StatusOK},  // over the write buffer
	} {
		c := n.dial(t)
		br := bufio.NewReader(c)
		const pipelined = 3
		if _, err := io.WriteString(c, strings.Repeat("GET "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\n", pipelined)); err != nil {
			t.Fatal(err)
		}
		var first []byte
		for i := range pipelined {
			a, err := readAnswer(c, br, 5*time.Second)
			if err != nil {
				t.Fatalf("%s: pipelined answer %d of %d: %v", tc.path, i+1, pipelined, err)
			}
			if i == 0 {
				first = a.body
			}
			if a.status != tc.status || string(a.body) != string(first) {
				t.Fatalf("%s: pipelined answer %d: status %d, %d bytes; want %d and the first answer's %d bytes",
					tc.path, i+1, a.status, len(a.body), tc.status, len(first))
			}
		}
	}
}

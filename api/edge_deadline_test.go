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
	e := newEnv(t)
	n := e.node(t, withTimeouts(time.Second, time.Minute))
	secret, _ := e.newKey(t, keyOpts{})

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
//
// The answers are read as bytes up to the close: fasthttp 1.51 with
// ReduceMemoryUsage drops the unflushed tail of an answer followed by a
// pipelined request (valyala/fasthttp#1672), so they may not parse.
func TestEdgePipelinedPartialRequest(t *testing.T) {
	e := newEnv(t)
	n := e.node(t, withTimeouts(time.Second, time.Minute))

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

package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/servicetest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// edgeAsk sends one request on c and reads its answer within wait.
func edgeAsk(c net.Conn, br *bufio.Reader, wait time.Duration) (int, error) {
	c.SetDeadline(time.Now().Add(wait)) //nolint:errcheck // it fails only on a closed connection, and then the write below fails and reports it
	if _, err := io.WriteString(c, "GET /healthcheck HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	return edgeRead(c, br, wait)
}

// edgeRead reads one answer from c within wait.
func edgeRead(c net.Conn, br *bufio.Reader, wait time.Duration) (int, error) {
	c.SetDeadline(time.Now().Add(wait)) //nolint:errcheck // it fails only on a closed connection, and then the read below fails and reports it
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

type edgeClient struct {
	c  net.Conn
	br *bufio.Reader
}

// edgeWaiting tells a client that asked and got no answer yet apart: true
// once the node logs that it ran out of file descriptors (the client waits
// for one), false when the answer comes first (it was slow). It fails the
// test when neither happens within 30 s.
func edgeWaiting(t *testing.T, cl edgeClient, logs *testenv.LogBuffer) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(logs.String(), "out of file descriptors") {
			return true
		}
		_, err := edgeRead(cl.c, cl.br, 200*time.Millisecond)
		if err == nil {
			return false
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("client waiting for an answer: %v", err)
		}
	}
	t.Fatalf("a client got no answer for 30 s and the node logged nothing about file descriptors")
	return false
}

// TestAPISurvivesFileExhaustion: `marketdata api` under a low open-file
// limit, with keep-alive clients holding every descriptor, stays up (it
// refuses new connections for the moment) and serves again once some
// close. It used to exit with "accept4: too many open files".
func TestAPISurvivesFileExhaustion(t *testing.T) {
	t.Parallel()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		testenv.Unavailable(t, "prlimit (util-linux)", err)
	}
	dsn := testenv.Database(t)
	_, prefix := testenv.Redis(t)
	testenv.NATS(t)
	if _, err := run(t, map[string]string{"MD_DATABASE_URL": dsn}, "migrate"); err != nil {
		t.Fatal(err)
	}
	// The test binary runs as the CLI (TestMain) under prlimit; both ports
	// are the kernel's choice, read back from the node's log.
	var logs testenv.LogBuffer
	p, err := servicetest.StartProc(servicetest.ProcOptions{
		Name: "api", Bin: os.Args[0], Args: []string{"api"}, Log: &logs, HTTP: true,
		Wrap: []string{prlimit, "--nofile=256:256"},
		Env: append(os.Environ(), drillMainEnv+"=1",
			"MD_DATABASE_URL="+dsn, "MD_REDIS_PREFIX="+prefix, "MD_NATS_URL="+testenv.NATSURL,
			"MD_REDIS_URL="+testenv.RedisURL, "MD_HTTP_ADDR=127.0.0.1:0", "MD_ADMIN_ADDR=127.0.0.1:0",
			"MD_CURSOR_SECRET="+strings.Repeat("c", 32), "MD_KEY_PEPPER="+strings.Repeat("p", 32)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var clients []edgeClient
	t.Cleanup(func() {
		for _, c := range clients {
			c.c.Close()
		}
		p.Stop(syscall.SIGKILL, time.Minute) //nolint:errcheck // killed on purpose: the exit status reports the kill
		if t.Failed() {
			t.Logf("api output:\n%.4000s", logs.String())
		}
	})
	if err := p.Start(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	httpAddr := p.HTTP

	// Keep-alive clients until the node stops answering new ones.
	var waiting *edgeClient
	for i := 0; i < 400 && waiting == nil; i++ {
		c, err := net.DialTimeout("tcp", httpAddr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		cl := edgeClient{c, bufio.NewReader(c)}
		clients = append(clients, cl)
		if _, err := edgeAsk(cl.c, cl.br, 2*time.Second); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("client %d: %v, want an answer or a wait", i, err)
			}
			// No answer in 2 s: waiting for a descriptor, or only slow on
			// two busy cores. It waits once the node says it ran out.
			if edgeWaiting(t, cl, &logs) {
				waiting = &clients[len(clients)-1]
			}
		}
	}
	if waiting == nil {
		t.Fatalf("400 clients under a 256-descriptor limit all served")
	}
	if err := p.Alive(); err != nil {
		t.Fatalf("api with %d clients open: %v", len(clients), err)
	}
	if !strings.Contains(logs.String(), "out of file descriptors") {
		t.Errorf("no log line about running out of file descriptors")
	}

	// Some clients leave: the waiting one is answered, and new ones are.
	for _, c := range clients[:20] {
		c.c.Close()
	}
	if status, err := edgeRead(waiting.c, waiting.br, 10*time.Second); err != nil || status != http.StatusNotFound {
		t.Errorf("waiting client after some closed: %d, %v; want 404", status, err)
	}
	c, err := net.DialTimeout("tcp", httpAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status, err := edgeAsk(c, bufio.NewReader(c), 10*time.Second)
	if err != nil || status != http.StatusNotFound {
		t.Fatalf("new client after some closed: %d, %v; want 404", status, err)
	}
	if err := p.Alive(); err != nil {
		t.Fatal(err)
	}
}

package servicetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
)

// logTail is how much of a node's log a failed test shows.
const logTail = 64 << 10

// Node is one child process of the world: an API node or the ingest
// worker. An API node's URL stays the same across Stop/Kill and Start, so a
// client (or a stream) reconnects to the same URL: it is a proxy's, held by
// the test process, in front of the port the node binds at each start (see
// frontProxy). Call its methods from the test's goroutine: they fail the
// test.
type Node struct {
	// Name is "ingest", "api1", "api2", ...
	Name string
	// HTTPAddr is the API's host:port ("" for ingest), fixed for the test.
	HTTPAddr string
	// AdminAddr serves /healthz, /readyz and /metrics: the address the
	// node bound at its latest Start, "" before the first.
	AdminAddr string

	s     *Service
	args  []string
	log   testenv.LogBuffer
	proxy *frontProxy // nil for ingest

	mu   sync.Mutex
	proc *Proc // nil while stopped
}

func (s *Service) newNode(name string, withHTTP bool, args ...string) *Node {
	n := &Node{Name: name, s: s, args: args}
	if withHTTP {
		n.proxy = newFrontProxy(s.t)
		n.HTTPAddr = n.proxy.addr()
	}
	return n
}

// URL is the API node's base URL, "http://host:port".
func (n *Node) URL() string { return "http://" + n.HTTPAddr }

// Start starts the node (again) and waits until its /readyz answers 200.
// The node binds ports of the kernel's choosing (":0"), read back from its
// log, so a start never fails for a port another process took meanwhile,
// and the readiness probe cannot reach another process's admin server.
func (n *Node) Start() {
	t := n.s.t
	t.Helper()
	n.mu.Lock()
	if n.proc != nil {
		n.mu.Unlock()
		t.Fatalf("servicetest: %s is already running", n.Name)
	}
	n.log.Write([]byte(fmt.Sprintf("--- servicetest: start %s %v at %s\n", n.Name, n.args, time.Now().UTC().Format(time.RFC3339Nano)))) //nolint:errcheck // LogBuffer.Write never fails
	env := append(append([]string(nil), n.s.env...), "MD_ADMIN_ADDR=127.0.0.1:0")
	if n.proxy != nil {
		env = append(env, "MD_HTTP_ADDR=127.0.0.1:0")
	}
	// The children log JSON (the binary's default; servicetest passes no
	// --log-format) at info level, where they name the addresses bound.
	p, err := StartProc(ProcOptions{Name: n.Name, Bin: n.s.bin, Args: n.args, Env: env, Log: &n.log, HTTP: n.proxy != nil})
	if err != nil {
		n.mu.Unlock()
		t.Fatalf("servicetest: %v", err)
	}
	n.proc = p
	n.mu.Unlock()
	// Errors quote the end of the log; the whole of it is shown at cleanup.
	if err := p.WaitListening(context.Background(), n.s.wait); err != nil {
		t.Fatalf("servicetest: %v", err)
	}
	n.AdminAddr = p.Admin
	if n.proxy != nil {
		n.proxy.setTarget(p.HTTP)
	}
	if err := p.WaitReady(context.Background(), n.s.wait); err != nil {
		t.Fatalf("servicetest: %v", err)
	}
}

// Running reports whether the node's process is running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil && n.proc.Alive() == nil
}

// Stop sends SIGTERM (a graceful shutdown: the API node drains its
// requests and closes streams with 1001) and waits until the process has
// exited; after the wait timeout it is killed and the test fails.
func (n *Node) Stop() {
	t := n.s.t
	t.Helper()
	if !n.signal(syscall.SIGTERM, n.s.wait) {
		t.Errorf("servicetest: %s did not stop within %s of SIGTERM; killed", n.Name, n.s.wait)
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (n *Node) Kill() {
	n.s.t.Helper()
	n.kill()
}

func (n *Node) kill() { n.signal(syscall.SIGKILL, n.s.wait) }

// signal sends sig and waits up to within for the exit; it kills the
// process after that and reports false.
func (n *Node) signal(sig syscall.Signal, within time.Duration) bool {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p == nil {
		return true
	}
	// New connections fail from now on, as they would once the node is
	// gone; open ones last as long as the node keeps them (a SIGTERM drains).
	if n.proxy != nil {
		n.proxy.setTarget("")
	}
	err := p.Stop(sig, within)
	n.log.Write([]byte(fmt.Sprintf("--- servicetest: %s ended by %v at %s\n", n.Name, sig, time.Now().UTC().Format(time.RFC3339Nano)))) //nolint:errcheck // LogBuffer.Write never fails
	return !errors.Is(err, ErrKilled)
}

// tail is the end of the node's log, across its restarts.
func (n *Node) tail() string {
	s := n.log.String()
	if len(s) > logTail {
		s = "…" + s[len(s)-logTail:]
	}
	return s
}

// Log is the node's whole output so far, across its restarts.
func (n *Node) Log() string { return n.log.String() }

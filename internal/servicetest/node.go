package servicetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
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
	cmd  *exec.Cmd
	done chan struct{}
	err  error
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
	if n.cmd != nil {
		n.mu.Unlock()
		t.Fatalf("servicetest: %s is already running", n.Name)
	}
	n.log.Write([]byte(fmt.Sprintf("--- servicetest: start %s %v at %s\n", n.Name, n.args, time.Now().UTC().Format(time.RFC3339Nano)))) //nolint:errcheck // LogBuffer.Write never fails
	cmd := exec.Command(n.s.bin, n.args...)
	cmd.Env = append(append([]string(nil), n.s.env...), "MD_ADMIN_ADDR=127.0.0.1:0")
	if n.proxy != nil {
		cmd.Env = append(cmd.Env, "MD_HTTP_ADDR=127.0.0.1:0")
	}
	// The children log JSON (the binary's default; servicetest passes no
	// --log-format) at info level, where they name the addresses bound.
	watch := newListenWatch(n.proxy != nil)
	cmd.Stdout, cmd.Stderr = &n.log, io.MultiWriter(&n.log, watch)
	// The children die with the test process, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		t.Fatalf("servicetest: start %s: %v", n.Name, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.err = cmd, done, nil
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(done)
	}()
	n.mu.Unlock()
	select {
	case <-watch.found:
	case <-done:
		t.Fatalf("servicetest: %s exited before listening: %v; log:\n%s", n.Name, n.exited(), n.tail())
	case <-time.After(n.s.wait):
		t.Fatalf("servicetest: %s not listening within %s; log:\n%s", n.Name, n.s.wait, n.tail())
	}
	n.AdminAddr = watch.admin
	if n.proxy != nil {
		n.proxy.setTarget(watch.http)
	}
	if err := n.waitReady(n.s.wait); err != nil {
		t.Fatalf("servicetest: %s: %v; log:\n%s", n.Name, err, n.tail())
	}
}

// Running reports whether the node's process is running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
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
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return true
	}
	// New connections fail from now on, as they would once the node is
	// gone; open ones last as long as the node keeps them (a SIGTERM drains).
	if n.proxy != nil {
		n.proxy.setTarget("")
	}
	cmd.Process.Signal(sig) //nolint:errcheck // it may have exited already; done says when it has
	ok := true
	select {
	case <-done:
	case <-time.After(within):
		ok = false
		cmd.Process.Kill() //nolint:errcheck // as above
		<-done
	}
	n.log.Write([]byte(fmt.Sprintf("--- servicetest: %s ended by %v at %s\n", n.Name, sig, time.Now().UTC().Format(time.RFC3339Nano)))) //nolint:errcheck // LogBuffer.Write never fails
	return ok
}

// exited returns an error once the current process has exited.
func (n *Node) exited() error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	select {
	case <-done:
		n.mu.Lock()
		defer n.mu.Unlock()
		return fmt.Errorf("exited: %v", n.err)
	default:
		return nil
	}
}

func (n *Node) waitReady(within time.Duration) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(within)
	var last string
	for {
		if err := n.exited(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.AdminAddr+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		cancel()
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s (last /readyz: %s)", within, last)
		}
		time.Sleep(50 * time.Millisecond) // polling /readyz: the child offers no readiness event
	}
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

func execCommand(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// listenWatch reads a starting node's JSON log as it is written and takes
// the addresses from its "admin listening" and "api listening" lines;
// found is closed once it has every address the node binds.
type listenWatch struct {
	wantHTTP bool
	found    chan struct{}

	mu          sync.Mutex
	line        []byte // the incomplete last line
	admin, http string
	done        bool
}

// maxLogLine bounds the incomplete line kept: a longer one is not a
// listening line, and is dropped.
const maxLogLine = 64 << 10

func newListenWatch(wantHTTP bool) *listenWatch {
	return &listenWatch{wantHTTP: wantHTTP, found: make(chan struct{})}
}

// Write never fails: the log itself goes to the node's LogBuffer.
func (w *listenWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		w.parse(w.line[:i])
		w.line = w.line[i+1:]
		if w.admin != "" && (w.http != "" || !w.wantHTTP) {
			w.done, w.line = true, nil
			close(w.found)
			break
		}
	}
	if len(w.line) > maxLogLine {
		w.line = nil
	}
	return len(p), nil
}

func (w *listenWatch) parse(line []byte) {
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Addr == "" {
		return
	}
	switch rec.Msg {
	case "admin listening":
		w.admin = rec.Addr
	case "api listening":
		w.http = rec.Addr
	}
}

package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Private service instances, for tests that stop, kill, restart or flush a
// service: each is the test's own process on a free loopback port, with its
// data in a temporary directory, stopped and removed when the test ends.
// A missing binary skips the test (fails it in CI, see Unavailable); under
// -short each skips before looking for it (see Integration).

// FreePort returns a loopback TCP port nobody listened on a moment ago.
//
// It is drawn at random below the kernel's ephemeral range (32768–60999 on
// Linux), never from it: a port the kernel hands out for ":0" is also the
// one it hands to the next outgoing connection of any process, and a
// server started on it a moment later may find it taken (CI saw a cluster
// node fail to bind that way). The same process never gets a port twice,
// and two test processes never get the same one: each holds an exclusive
// lock on a file named for every port it was given (portLockDir) until it
// exits, and a port whose file another process holds is skipped. Without it
// two test binaries (`go test -p 2`) could both find a port free and both
// hand it to a server.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := freePortLow + rand.IntN(freePortHigh-freePortLow)
		if portsGiven[port] || !lockPort(t, port) {
			continue
		}
		portsGiven[port] = true // given or not, this process now holds its lock
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		return port
	}
	t.Fatalf("free port: none free in [%d, %d)", freePortLow, freePortHigh)
	return 0
}

// The range FreePort draws from: above the shared services (Postgres 5432,
// Redis 6379, NATS 4222) and below both the loopback cluster topology of
// deploy/local/cluster.sh (32001–32433) and the ephemeral range.
const freePortLow, freePortHigh = 20000, 32000

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
	portLocks  []*os.File // held open, so locked, until the process exits
)

// portLockDir holds one lock file per port any test process of this user
// was given. Processes exclude each other only when they share it: the same
// user and the same TMPDIR (as `go test` gives every test binary it runs).
var portLockDir = filepath.Join(os.TempDir(), "marketdata-test-ports-"+strconv.Itoa(os.Getuid()))

// lockPort takes the exclusive lock of port's file without waiting and
// keeps it for the rest of the process; false when another process holds
// it. Anything else that stops it (the directory or file cannot be made)
// fails the test with the cause, rather than 1000 tries later as "none free".
func lockPort(t testing.TB, port int) bool {
	t.Helper()
	if err := os.MkdirAll(portLockDir, 0o700); err != nil {
		t.Fatalf("free port: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(portLockDir, strconv.Itoa(port)), os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close() // read-only and unlocked: nothing to lose
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false
		}
		t.Fatalf("free port: lock %s: %v", f.Name(), err)
	}
	portLocks = append(portLocks, f)
	return true
}

// lookBin finds a binary in PATH or in one of dirs.
func lookBin(t testing.TB, name string, dirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	Unavailable(t, name, fmt.Errorf("binary %s not found in PATH or %v", name, dirs))
	return ""
}

// waitTCP waits until addr accepts connections.
func waitTCP(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not accept connections after %s: %w", addr, within, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a port, not standing in for an event
	}
}

// waitClosed waits until addr refuses connections.
func waitClosed(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return nil
		}
		c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still accepts connections after %s", addr, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// child is a server process the test started and owns.
type child struct {
	t    testing.TB
	name string
	bin  string
	args []string
	addr string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  *bytes.Buffer
}

// startChild starts bin with args, serving on addr, and kills it when the
// test ends.
func startChild(t testing.TB, name, bin, addr string, args ...string) *child {
	t.Helper()
	c := &child{t: t, name: name, bin: bin, addr: addr, args: args}
	c.start()
	t.Cleanup(func() { c.signal(syscall.SIGKILL) })
	return c
}

func (c *child) start() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		c.t.Fatalf("%s: already running", c.name)
	}
	cmd := exec.Command(c.bin, c.args...)
	c.out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("%s: start: %v", c.name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck // the exit is expected
	c.cmd, c.done = cmd, done
	if err := waitTCP(c.addr, 20*time.Second); err != nil {
		c.t.Fatalf("%s: %v; output:\n%s", c.name, err, c.out.String())
	}
}

// signal sends sig and waits for the process to exit.
func (c *child) signal(sig syscall.Signal) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Signal(sig)             //nolint:errcheck // it may have exited
	c.cmd.Process.Signal(syscall.SIGCONT) //nolint:errcheck // a paused process takes sig only once it runs
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill() //nolint:errcheck // it may have exited meanwhile; done says when it has
		<-c.done
	}
	c.cmd = nil
}

// pause stops the process (SIGSTOP) without ending it: its connections stay
// open and nothing answers on them until resume (signal continues a paused
// process after sending its signal, so Stop and the test's end work on one).
func (c *child) pause() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		c.t.Fatalf("%s: not running", c.name)
	}
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatalf("%s: SIGSTOP: %v", c.name, err)
	}
}

// resume continues a paused process (SIGCONT).
func (c *child) resume() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		c.cmd.Process.Signal(syscall.SIGCONT) //nolint:errcheck // it may have exited
	}
}

// stop shuts the process down (SIGTERM), waits for it, and then for its
// port to refuse connections.
func (c *child) stop() {
	c.t.Helper()
	c.signal(syscall.SIGTERM)
	if err := waitClosed(c.addr, 10*time.Second); err != nil {
		c.t.Fatal(err)
	}
}

// RedisServer is a private redis-server without persistence: Start after
// Stop or Kill brings it back empty.
type RedisServer struct {
	c *child
	// Addr is host:port; URL is its redis:// URL.
	Addr, URL string
}

// StartRedis starts a private redis-server on a free port.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	Integration(t, "redis-server")
	bin := lookBin(t, "redis-server", "/usr/bin", "/usr/local/bin")
	port := FreePort(t)
	dir := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return &RedisServer{Addr: addr, URL: "redis://" + addr + "/0", c: startChild(t, "redis-server", bin, addr,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--protected-mode", "no")}
}

// Start starts the server again (empty) on the same port.
func (r *RedisServer) Start() { r.c.t.Helper(); r.c.start() }

// Stop shuts the server down (SIGTERM) and waits for it.
func (r *RedisServer) Stop() { r.c.t.Helper(); r.c.stop() }

// Kill kills the server (SIGKILL) and waits for it.
func (r *RedisServer) Kill() { r.c.t.Helper(); r.c.signal(syscall.SIGKILL) }

// Pause stops the server's process (SIGSTOP): a Redis that is up but does
// not answer, as on a machine that does not give it a core, until Resume.
func (r *RedisServer) Pause() { r.c.t.Helper(); r.c.pause() }

// Resume continues a paused server (SIGCONT).
func (r *RedisServer) Resume() { r.c.t.Helper(); r.c.resume() }

// NATSServer is a private nats-server with JetStream; its store directory
// survives Stop and Start.
type NATSServer struct {
	c *child
	// URL is its nats:// URL.
	URL  string
	Addr string
}

// StartNATS starts a private nats-server -js on a free port.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	Integration(t, "nats-server")
	bin := lookBin(t, "nats-server", "/usr/sbin", "/usr/local/bin", "/usr/bin")
	port := FreePort(t)
	dir := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return &NATSServer{Addr: addr, URL: "nats://" + addr, c: startChild(t, "nats-server", bin, addr,
		"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", dir)}
}

// Start starts the server again on the same port and store directory.
func (n *NATSServer) Start() { n.c.t.Helper(); n.c.start() }

// Stop shuts the server down (SIGTERM) and waits for it.
func (n *NATSServer) Stop() { n.c.t.Helper(); n.c.stop() }

// Kill kills the server (SIGKILL) and waits for it.
func (n *NATSServer) Kill() { n.c.t.Helper(); n.c.signal(syscall.SIGKILL) }

// PostgresServer is a private PostgreSQL cluster (initdb into a temporary
// directory, trust authentication, fsync off) run with pg_ctl. As root, its
// programs run as the postgres user (they refuse root).
type PostgresServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	// Addr is host:port.
	Addr string
}

// pgBinDirs are where Debian and the PostgreSQL packages put the programs.
func pgBinDirs() []string {
	if d := os.Getenv("MD_TEST_PG_BIN"); d != "" {
		return []string{d}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	return append(dirs, "/usr/local/pgsql/bin")
}

// StartPostgres initialises and starts a private PostgreSQL on a free port.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	Integration(t, "PostgreSQL (pg_ctl)")
	bin := filepath.Dir(lookBin(t, "pg_ctl", pgBinDirs()...))
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		Unavailable(t, "initdb", err)
	}
	root, err := os.MkdirTemp("", "md-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(root); err != nil {
			t.Logf("remove %s: %v", root, err)
		}
	})
	dir := filepath.Join(root, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := &PostgresServer{t: t, bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			Unavailable(t, "PostgreSQL (user postgres)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(root, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := p.run("initdb", "-D", dir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p.port = FreePort(t)
	p.Addr = "127.0.0.1:" + strconv.Itoa(p.port)
	p.Start()
	t.Cleanup(func() {
		p.run("pg_ctl", "-D", p.dir, "-m", "immediate", "-w", "stop") //nolint:errcheck // it may be stopped
	})
	return p
}

// run runs one of the PostgreSQL programs, as postgres when we are root.
func (p *PostgresServer) run(prog string, args ...string) (string, error) {
	name := filepath.Join(p.bin, prog)
	if os.Geteuid() == 0 {
		name, args = "runuser", append([]string{"-u", "postgres", "--", name}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// URL is the connection URL of database db on the server.
func (p *PostgresServer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&connect_timeout=5", p.Addr, db)
}

// Start starts the server (on its port) and waits until it accepts
// connections.
func (p *PostgresServer) Start() {
	p.t.Helper()
	opts := strings.Join([]string{
		"-p", strconv.Itoa(p.port), "-k", p.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=60",
	}, " ")
	if out, err := p.run("pg_ctl", "-D", p.dir, "-o", opts, "-l", filepath.Join(p.dir, "log"), "-w", "-t", "30", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "log"))
		p.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	if err := waitTCP(p.Addr, 20*time.Second); err != nil {
		p.t.Fatal(err)
	}
}

// Stop shuts the server down (fast: clients are disconnected) and waits.
func (p *PostgresServer) Stop() {
	p.t.Helper()
	if out, err := p.run("pg_ctl", "-D", p.dir, "-m", "fast", "-w", "-t", "30", "stop"); err != nil {
		p.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// Kill stops the server immediately (no shutdown checkpoint, like a crash).
func (p *PostgresServer) Kill() {
	p.t.Helper()
	if out, err := p.run("pg_ctl", "-D", p.dir, "-m", "immediate", "-w", "-t", "30", "stop"); err != nil {
		p.t.Fatalf("pg_ctl stop -m immediate: %v\n%s", err, out)
	}
}

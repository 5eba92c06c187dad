package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// TestPrivateServices: each private server answers, stops, and answers
// again after Start (Redis empty, Postgres and NATS with their data).
func TestPrivateServices(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
		defer cancel()
		r := StartRedis(t)
		opt, _ := redis.ParseURL(r.URL)
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		r.Stop()
		if err := rdb.Ping(ctx).Err(); err == nil {
			t.Fatal("ping after Stop: got no error")
		}
		r.Start()
		if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
			t.Errorf("after restart: exists = %d, %v; want 0 (empty)", n, err)
		}
		r.Kill()
	})
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		n := StartNATS(t)
		nc, err := nats.Connect(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
		n.Stop()
		if _, err := nats.Connect(n.URL); err == nil {
			t.Fatal("connect after Stop: got no error")
		}
		n.Start()
		nc, err = nats.Connect(n.URL)
		if err != nil {
			t.Fatalf("connect after Start: %v", err)
		}
		nc.Close()
		n.Kill()
		if _, err := nats.Connect(n.URL); err == nil {
			t.Fatal("connect after Kill: got no error")
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
		defer cancel()
		p := StartPostgres(t)
		conn, err := pgx.Connect(ctx, p.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE x (a int); INSERT INTO x VALUES (7)"); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		p.Stop()
		if _, err := pgx.Connect(ctx, p.URL("postgres")); err == nil {
			t.Fatal("connect after Stop: got no error")
		}
		p.Start()
		conn, err = pgx.Connect(ctx, p.URL("postgres"))
		if err != nil {
			t.Fatalf("connect after Start: %v", err)
		}
		defer conn.Close(ctx)
		var a int
		if err := conn.QueryRow(ctx, "SELECT a FROM x").Scan(&a); err != nil || a != 7 {
			t.Errorf("after restart: a = %d, %v; want 7", a, err)
		}
		p.Kill()
	})
}

// Two test processes never get the same port from FreePort: a port whose
// lock another process holds is refused, and is free again once that
// process ends. The other process is this test binary run again
// (TestHoldPortHelper).
func TestFreePortLockedAcrossProcesses(t *testing.T) {
	port := FreePort(t)
	releasePortLock(t, port) // as if this process had never been given it
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldPortHelper$")
	cmd.Env = append(os.Environ(), "MD_TEST_HOLD_PORT="+strconv.Itoa(port))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper: %q, %v", line, err)
	}
	portsMu.Lock()
	locked := lockPort(t, port)
	portsMu.Unlock()
	if locked {
		t.Errorf("port %d: locked here while another process holds it", port)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	portsMu.Lock()
	locked = lockPort(t, port)
	portsMu.Unlock()
	if !locked {
		t.Errorf("port %d: still refused after the other process ended", port)
	}
}

// releasePortLock closes this process's lock file of port.
func releasePortLock(t *testing.T, port int) {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	name := filepath.Join(portLockDir, strconv.Itoa(port))
	for i, f := range portLocks {
		if f.Name() == name {
			_ = f.Close() // read-only: closing it only drops the lock
			portLocks = append(portLocks[:i], portLocks[i+1:]...)
			return
		}
	}
	t.Fatalf("port %d: no lock held", port)
}

// TestHoldPortHelper is TestFreePortLockedAcrossProcesses's other process:
// it locks the port it is given, says so, and holds it until stdin closes.
func TestHoldPortHelper(t *testing.T) {
	p := os.Getenv("MD_TEST_HOLD_PORT")
	if p == "" {
		t.Skip("the other process of TestFreePortLockedAcrossProcesses")
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	if !lockPort(t, port) {
		t.Fatalf("port %d: not locked", port)
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

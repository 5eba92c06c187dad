package testenv

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServerBin is the redis-server binary PrivateRedis runs.
var RedisServerBin = envOr("MD_TEST_REDIS_SERVER", "redis-server")

// PrivateRedis starts a redis-server of the test's own on a free loopback
// port, without persistence, and returns a client and its address. Tests
// that flush scripts or data (SCRIPT FLUSH, FLUSHALL), or stop, kill or
// restart Redis, use it instead of the shared Redis, where they would break
// other packages' tests running at the same time (and those theirs). The
// server is killed and its directory removed when the test ends.
func PrivateRedis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	bin, err := exec.LookPath(RedisServerBin)
	if err != nil {
		Unavailable(t, "redis-server (binary)", err)
	}
	dir := t.TempDir()
	var lastErr error
	for range 5 { // a port picked free may be taken before the server binds it
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "",
			"--appendonly", "no", "--dir", dir, "--protected-mode", "no", "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
		if lastErr = waitPing(rdb, exited, 15*time.Second); lastErr == nil {
			t.Cleanup(func() {
				rdb.Close()
				cmd.Process.Kill() //nolint:errcheck // it may have exited already
				<-exited
			})
			return rdb, addr
		}
		rdb.Close()
		cmd.Process.Kill() //nolint:errcheck
		<-exited
	}
	t.Fatalf("private redis-server did not start: %v", lastErr)
	return nil, ""
}

// waitPing polls until rdb answers PING, the process exits or timeout ends.
func waitPing(rdb *redis.Client, exited <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("redis-server exited (%v); last ping: %w", werr, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %s: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

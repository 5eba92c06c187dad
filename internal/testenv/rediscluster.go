package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/redisx"
)

// RedisCluster is a Redis Cluster of the test's own: 3 masters and 3
// replicas on free loopback ports, each redis-server in its own temporary
// directory, with no persistence. Everything is killed and removed when the
// test ends. Tests may kill its nodes (KillMaster, Kill).
type RedisCluster struct {
	t     testing.TB
	nodes []*RedisNode
}

// RedisNode is one redis-server of a RedisCluster.
type RedisNode struct {
	// Addr is host:port.
	Addr string
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// ClusterNodeTimeout is the cluster-node-timeout of test clusters: a
// replica takes over a killed master about 2–4 s after it dies.
const ClusterNodeTimeout = 2 * time.Second

// StartRedisCluster starts a 3+3 cluster and waits until every node reports
// cluster_state:ok and every replica is in sync. Without redis-server or
// redis-cli it skips the test (fails it with CI=true).
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	Integration(t, "a Redis Cluster (redis-server, redis-cli)")
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			Unavailable(t, bin, err)
		}
	}
	c := &RedisCluster{t: t}
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n.cmd != nil {
				n.cmd.Process.Kill() //nolint:errcheck // may be dead already
				<-n.done
			}
		}
	})
	for i := range 6 {
		n := &RedisNode{dir: filepath.Join(root, strconv.Itoa(i))}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
		// A node whose port or bus port someone took between FreePort and
		// its bind exits at once: it gets new ports, a few times.
		for try := 1; ; try++ {
			port, bus := FreePort(t), FreePort(t)
			n.Addr = fmt.Sprintf("127.0.0.1:%d", port)
			n.args = []string{
				"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-config-file", filepath.Join(n.dir, "nodes.conf"),
				"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout / time.Millisecond)),
				"--cluster-replica-validity-factor", "0",
				"--save", "", "--appendonly", "no", "--dir", n.dir,
				"--logfile", filepath.Join(n.dir, "redis.log"), "--protected-mode", "no"}
			n.start(t)
			err := c.ping(ctx, n)
			if err == nil {
				break
			}
			log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
			if n.Alive() || try == 3 {
				t.Fatalf("redis-server %s did not answer: %v\n%s", n.Addr, err, log)
			}
			t.Logf("redis-server %s exited at start, trying other ports: %s", n.Addr, log)
			os.Remove(filepath.Join(n.dir, "nodes.conf")) //nolint:errcheck // may not exist
		}
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		var views []string
		for _, n := range c.nodes {
			rdb := redis.NewClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, MaxRetries: -1})
			out, err := rdb.ClusterNodes(context.Background()).Result()
			rdb.Close()
			views = append(views, fmt.Sprintf("%s (alive %v): %v\n%s", n.Addr, n.Alive(), err, out))
		}
		t.Fatalf("redis cluster: %v\n%s", err, strings.Join(views, "\n"))
	}
	return c
}

func (n *RedisNode) start(t testing.TB) {
	t.Helper()
	n.cmd = exec.Command("redis-server", n.args...)
	n.done = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	cmd, done := n.cmd, n.done
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck // killed on purpose
}

// Restart starts a killed node again with its cluster config (it rejoins,
// as a replica if its slots moved) and waits until it answers.
func (c *RedisCluster) Restart(ctx context.Context, addr string) {
	c.t.Helper()
	n := c.Node(addr)
	if n == nil || n.Alive() {
		c.t.Fatalf("redis node %s: not a dead node of the cluster", addr)
	}
	n.start(c.t)
	c.waitPing(ctx, addr)
}

func (c *RedisCluster) waitPing(ctx context.Context, addr string) {
	c.t.Helper()
	if err := c.ping(ctx, c.Node(addr)); err != nil {
		c.t.Fatalf("redis-server %s did not answer: %v", addr, err)
	}
}

// ping waits until n answers PING, the context ends or n's process exits.
func (c *RedisCluster) ping(ctx context.Context, n *RedisNode) error {
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	for {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		select {
		case <-n.done:
			return fmt.Errorf("the process exited: %w", err)
		case <-time.After(20 * time.Millisecond): // polling a process that is starting
		}
	}
}

// Addrs are the addresses of all six nodes, dead or alive.
func (c *RedisCluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr
	}
	return out
}

// URL is MD_REDIS_URL for the cluster: its addresses, comma-separated.
func (c *RedisCluster) URL() string { return strings.Join(c.Addrs(), ",") }

// Node returns the node at addr, or nil.
func (c *RedisCluster) Node(addr string) *RedisNode {
	for _, n := range c.nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// Alive reports whether the node's process still runs.
func (n *RedisNode) Alive() bool {
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Client returns a plain client of one node.
func (n *RedisNode) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Kill SIGKILLs the node at addr and waits until its process is gone.
func (c *RedisCluster) Kill(addr string) {
	c.t.Helper()
	n := c.Node(addr)
	if n == nil {
		c.t.Fatalf("no redis node %s", addr)
	}
	n.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // may be dead already
	<-n.done
}

// KillMaster SIGKILLs the master that serves key and returns its address.
func (c *RedisCluster) KillMaster(ctx context.Context, key string) string {
	c.t.Helper()
	addr, err := c.MasterOf(ctx, key)
	if err != nil {
		c.t.Fatal(err)
	}
	c.Kill(addr)
	return addr
}

// WaitPromoted waits until the slots of the dead master at addr are served
// by another live master, and returns that master's address and when the
// promotion was first seen.
func (c *RedisCluster) WaitPromoted(ctx context.Context, dead, key string) (string, time.Time, error) {
	for {
		addr, err := c.MasterOf(ctx, key)
		if err == nil && addr != dead {
			n := c.Node(addr)
			if n != nil && n.Alive() {
				return addr, time.Now(), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", time.Time{}, fmt.Errorf("slots of %s not taken over: %v (last: %s)", dead, ctx.Err(), addr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitHealthy waits until every live node reports cluster_state:ok and
// knows the others, and every live replica's link to its master is up.
func (c *RedisCluster) WaitHealthy(ctx context.Context) error {
	var last string
	for {
		last = c.unhealthy(ctx)
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %s", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// unhealthy returns why the cluster is not yet healthy, or "".
func (c *RedisCluster) unhealthy(ctx context.Context) string {
	for _, n := range c.nodes {
		if !n.Alive() {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, MaxRetries: -1})
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			rdb.Close()
			return n.Addr + ": " + err.Error()
		}
		if !strings.Contains(info, "cluster_state:ok") {
			rdb.Close()
			return n.Addr + ": cluster_state not ok"
		}
		repl, err := rdb.Info(ctx, "replication").Result()
		rdb.Close()
		if err != nil {
			return n.Addr + ": " + err.Error()
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return n.Addr + ": replica link not up"
		}
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err.Error()
	}
	masters := 0
	for _, n := range nodes {
		if !n.Failed && n.Master && len(n.Slots) > 0 {
			masters++
		}
	}
	if masters < 3 {
		return fmt.Sprintf("%d masters serve slots, want 3", masters)
	}
	return ""
}

// ClosedPort returns a loopback host:port nobody listens on (a dead server).
func ClosedPort(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// Open returns a client of the cluster as the service makes one of
// MD_REDIS_URL (redisx.Open), its failover watcher logging to the test's
// output. It is closed when the test ends.
func (c *RedisCluster) Open(t testing.TB) *redisx.Cluster {
	t.Helper()
	rdb, err := redisx.Open(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	cl, ok := rdb.(*redisx.Cluster)
	if !ok {
		t.Fatalf("redisx.Open(%q): got %T, want *redisx.Cluster", c.URL(), rdb)
	}
	cl.SetLogger(slog.New(slog.NewTextHandler(t.Output(), nil)))
	return cl
}

package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// natsCluster is three nats-server processes of the test's own, clustered
// with JetStream on free loopback ports.
type natsCluster struct {
	t     *testing.T
	bin   string
	dir   string
	confs [3]string
	cmds  [3]*exec.Cmd
	urls  [3]string
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startNATSCluster starts n0, n1, n2; all are killed when the test ends.
func startNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	testenv.Integration(t, "a NATS cluster (nats-server)")
	bin := os.Getenv("MD_TEST_NATS_SERVER")
	if bin == "" {
		bin = "/usr/sbin/nats-server"
	}
	if _, err := exec.LookPath(bin); err != nil {
		testenv.Unavailable(t, "nats-server (binary)", err)
	}
	c := &natsCluster{t: t, bin: bin, dir: t.TempDir()}
	var ports, routes [3]int
	for i := range 3 {
		ports[i], routes[i] = freePort(t), freePort(t)
		c.urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[i])
	}
	var routeURLs []string
	for _, p := range routes {
		routeURLs = append(routeURLs, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	for i := range 3 {
		conf := fmt.Sprintf("server_name: n%d\nlisten: 127.0.0.1:%d\njetstream { store_dir: %q }\n"+
			"cluster { name: mdtest, listen: 127.0.0.1:%d, routes: [%s] }\n",
			i, ports[i], filepath.Join(c.dir, fmt.Sprint("store", i)), routes[i], strings.Join(routeURLs, ", "))
		c.confs[i] = filepath.Join(c.dir, fmt.Sprintf("n%d.conf", i))
		if err := os.WriteFile(c.confs[i], []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range 3 {
			c.kill(i)
		}
	})
	return c
}

func (c *natsCluster) start(i int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, "-c", c.confs[i])
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start nats-server n%d: %v", i, err)
	}
	c.cmds[i] = cmd
}

func (c *natsCluster) kill(i int) {
	if cmd := c.cmds[i]; cmd != nil {
		cmd.Process.Kill() //nolint:errcheck // it may have exited already
		cmd.Wait()         //nolint:errcheck // killed on purpose: Wait reports the kill
		c.cmds[i] = nil
	}
}

// killNamed kills the server named nN.
func (c *natsCluster) killNamed(name string) int {
	c.t.Helper()
	var i int
	if _, err := fmt.Sscanf(name, "n%d", &i); err != nil || i < 0 || i > 2 {
		c.t.Fatalf("server name %q is not one of the cluster's", name)
	}
	c.kill(i)
	return i
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func health(w *ingest.Worker) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return w.StreamHealth(ctx)
}

// TestStreamReplicasOnCluster runs on a 3-node NATS 2.9 cluster of its own:
// streams created R1, then asked for 3, are raised to R3 (streams and the
// consumer), and StreamHealth reports them short until the new replicas are
// current. Killing the node of an R1 stream: StreamHealth errors (not
// ready), where the consumer alone would only log "no heartbeat received",
// and is ready again when the node returns. Killing an R3 stream's leader: a
// new leader within seconds, ready, reported as 2 of 3 current.
func TestStreamReplicasOnCluster(t *testing.T) {
	t.Parallel()
	c := startNATSCluster(t)
	nc, err := nats.Connect(strings.Join(c.urls[:], ","), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	config := func(replicas int) ingest.Config {
		id := testenv.Name("c")
		up := strings.ToUpper(id)
		c := ingest.DefaultConfig()
		c.Stream, c.SubjectPrefix = "MD_"+up, id+"."+ingest.DefaultSubjectPrefix
		c.DLQStream, c.DLQPrefix = "MD_DLQ_"+up, id+"."+ingest.DefaultDLQPrefix
		c.Replicas = replicas
		return c
	}
	worker := func(cfg ingest.Config) *ingest.Worker {
		w, err := ingest.New(cfg, ingest.Deps{NC: nc, Metrics: ingest.NewMetrics(prometheus.NewRegistry()), Log: discardLog()})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	// R1 streams (the old default), then ingest asks for 3: raised.
	r3 := config(1)
	eventually(t, 30*time.Second, "JetStream of the cluster answers", func() error {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return ingest.EnsureStreams(cctx, js, r3, nil)
	})
	if _, err := ingest.EnsureConsumer(ctx, js, r3); err != nil {
		t.Fatal(err)
	}
	r3.Replicas = 3
	log, logs := newLog()
	if err := ingest.EnsureStreams(ctx, js, r3, log); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{r3.Stream, r3.DLQStream} {
		found := false
		for _, rec := range logLines(t, logs, "stream replicas raised; the new replicas catch up in the background") {
			found = found || rec["stream"] == stream
		}
		if !found {
			t.Errorf("no 'stream replicas raised' line for %s; warnings: %v", stream, logLines(t, logs, shortMsg))
		}
	}
	w3 := worker(r3)
	eventually(t, 30*time.Second, "raised streams and consumer have 3 current replicas", func() error {
		degraded, err := health(w3)
		if err == nil && degraded != "" {
			err = fmt.Errorf("degraded: %s", degraded)
		}
		return err
	})
	if s, err := js.Stream(ctx, r3.Stream); err != nil || s.CachedInfo().Config.Replicas != 3 {
		t.Fatalf("stream after the raise: %v, want configured with 3 replicas", err)
	}

	// An R1 stream whose only node dies: not ready (where the consumer alone
	// would only log "no heartbeat received"); ready again by itself when
	// the node returns.
	r1 := config(1)
	if err := ingest.EnsureStreams(ctx, js, r1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.EnsureConsumer(ctx, js, r1); err != nil {
		t.Fatal(err)
	}
	w1 := worker(r1)
	if degraded, err := health(w1); err != nil || degraded != "" {
		t.Fatalf("R1 stream asked for 1: got %q, %v; want healthy", degraded, err)
	}
	s1, err := js.Stream(ctx, r1.Stream)
	if err != nil {
		t.Fatal(err)
	}
	killed := c.killNamed(s1.CachedInfo().Cluster.Leader)
	eventually(t, 30*time.Second, "R1 stream whose node died reported not ready", func() error {
		if _, err := health(w1); err == nil {
			return fmt.Errorf("StreamHealth: nil error")
		}
		return nil
	})
	c.start(killed)
	eventually(t, 30*time.Second, "R1 stream ready again after its node returned", func() error {
		_, err := health(w1)
		return err
	})

	// An R3 stream's leader dies: a new leader, ready again, reported as 2
	// of 3 current. (Streams created R3: the steady state of a cluster.)
	r3 = config(3)
	if err := ingest.EnsureStreams(ctx, js, r3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.EnsureConsumer(ctx, js, r3); err != nil {
		t.Fatal(err)
	}
	w3 = worker(r3)
	eventually(t, 30*time.Second, "R3 streams and consumer have 3 current replicas", func() error {
		degraded, err := health(w3)
		if err == nil && degraded != "" {
			err = fmt.Errorf("degraded: %s", degraded)
		}
		return err
	})
	s3, err := js.Stream(ctx, r3.Stream)
	if err != nil {
		t.Fatal(err)
	}
	c.killNamed(s3.CachedInfo().Cluster.Leader)
	eventually(t, 30*time.Second, "R3 stream ready again after its leader died, reported short", func() error {
		degraded, err := health(w3)
		if err == nil && !strings.Contains(degraded, "2 of 3") {
			err = fmt.Errorf("degraded: %q, want it to say 2 of 3", degraded)
		}
		return err
	})
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

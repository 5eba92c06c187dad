package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/ingest"
)

// child is one marketdata process of the suite (api or ingest).
type child struct {
	name  string
	http  string // API address, empty for ingest
	admin string
	log   string
	cmd   *exec.Cmd
	done  chan struct{}
	err   error
}

// freeAddr picks a loopback port that is free now (below the topology's
// range never: the kernel hands out ephemeral ports from 32768 up).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startChild runs the binary with args and the topology's environment plus
// extra, and waits until its /readyz answers 200.
func (s *suite) startChild(ctx context.Context, name string, args, extra []string, withHTTP bool) (*child, error) {
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c := &child{name: name, admin: admin, log: filepath.Join(s.dir, name+".log"), done: make(chan struct{})}
	env := append(append(os.Environ(), s.env...), "MD_ADMIN_ADDR="+admin)
	if withHTTP {
		if c.http, err = freeAddr(); err != nil {
			return nil, err
		}
		env = append(env, "MD_HTTP_ADDR="+c.http)
	}
	env = append(env, extra...)
	f, err := os.Create(c.log)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(s.bin, args...)
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = f, f
	if err := c.cmd.Start(); err != nil {
		f.Close() //nolint:errcheck // nothing was written; the Start error is the one to report
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		f.Close() //nolint:errcheck // the child wrote the log through its own descriptor, not this one
		close(c.done)
	}()
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		c.stop(5 * time.Second)
		return nil, err
	}
	return c, nil
}

func (s *suite) startIngest(ctx context.Context, name string) (*child, error) {
	return s.startChild(ctx, name, []string{"ingest", "--replicas", "3", "--ack-wait", "5s"}, nil, false)
}

// startAPI starts one API node; extra overrides the environment (say
// MD_RATE_LIMIT).
func (s *suite) startAPI(ctx context.Context, name string, extra []string) (*child, error) {
	return s.startChild(ctx, name, []string{"api"}, extra, true)
}

// alive returns an error once the process has exited.
func (c *child) alive() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited: %v; last output:\n%s", c.name, c.err, c.tail())
	default:
		return nil
	}
}

// readyz returns /readyz's status and body.
func (c *child) readyz(ctx context.Context) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.admin+"/readyz", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (c *child) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		if err := c.alive(); err != nil {
			return err
		}
		code, body, err := c.readyz(ctx)
		if err == nil && code == http.StatusOK {
			return nil
		}
		last = fmt.Sprintf("%d %s %v", code, body, err)
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s (last /readyz: %s); log %s:\n%s", c.name, timeout, last, c.log, c.tail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and kills the process if it has not exited within grace.
func (c *child) stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	// An API node drains open connections on shutdown: close the idle ones.
	httpClient.CloseIdleConnections()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// tail is the end of the process's log.
func (c *child) tail() string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return ""
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// metric sums the samples of a counter or gauge named name on /metrics.
func (c *child) metric(ctx context.Context, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(rest[strings.LastIndexByte(rest, ' ')+1:], &v); err == nil {
			sum += v
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("%s: no metric %s", c.name, name)
	}
	return sum, nil
}

// command runs one marketdata subcommand to completion and returns stdout.
func (s *suite) command(ctx context.Context, args ...string) ([]byte, error) {
	return s.commandWith(ctx, s.bin, nil, args...)
}

func (s *suite) commandWith(ctx context.Context, bin string, extra []string, args ...string) ([]byte, error) {
	stdout, stderr, err := s.capture(ctx, bin, extra, args...)
	if err != nil {
		return stdout, fmt.Errorf("marketdata %s: %w\nstderr:\n%s", strings.Join(args, " "), err, tailString(stderr, 3000))
	}
	return stdout, nil
}

// capture runs bin to completion with the topology's environment plus extra.
func (s *suite) capture(ctx context.Context, bin string, extra []string, args ...string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(append(os.Environ(), s.env...), extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.Bytes(), stderr.String(), err
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// commandJSON runs a subcommand with --json and decodes its answer into v.
func (s *suite) commandJSON(ctx context.Context, v any, args ...string) error {
	out, err := s.command(ctx, append(args, "--json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("marketdata %s: decode %q: %w", strings.Join(args, " "), out, err)
	}
	return nil
}

// natsConn connects to all three NATS servers.
func natsConn() (*nats.Conn, error) {
	var urls []string
	for _, p := range natsPorts {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return nats.Connect(strings.Join(urls, ","), nats.Name("clustertest"), nats.Timeout(3*time.Second),
		nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
}

// quiesce waits until ingest has acknowledged every message of the stream.
func (s *suite) quiesce(ctx context.Context) error {
	nc, err := natsConn()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	last := ""
	for {
		ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
		info, err := func() (*jetstream.ConsumerInfo, error) {
			cons, err := js.Consumer(ictx, ingest.DefaultStream, ingest.DefaultConsumer)
			if err != nil {
				return nil, err
			}
			return cons.Info(ictx)
		}()
		cancel()
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			return nil
		}
		if err == nil {
			last = fmt.Sprintf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ingest did not catch up within 90s: %s", last)
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not a stand-in for an event
	}
}

package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/marketdata/marketdata/internal/servicetest"
)

// child is one marketdata process of the suite (api or ingest).
type child struct {
	name  string
	http  string // API address, empty for ingest
	admin string
	log   string
	proc  *servicetest.Proc
}

// startChild runs the binary with args and the topology's environment plus
// extra, on ports of the kernel's choosing, and waits until its /readyz
// answers 200.
func (s *suite) startChild(ctx context.Context, name string, args, extra []string, withHTTP bool) (*child, error) {
	c := &child{name: name, log: filepath.Join(s.dir, name+".log")}
	env := append(append(os.Environ(), s.env...), "MD_ADMIN_ADDR=127.0.0.1:0")
	if withHTTP {
		env = append(env, "MD_HTTP_ADDR=127.0.0.1:0")
	}
	env = append(env, extra...)
	p, err := servicetest.StartProc(servicetest.ProcOptions{Name: name, Bin: s.bin, Args: args, Env: env, LogPath: c.log, HTTP: withHTTP})
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx, 60*time.Second); err != nil {
		return nil, fmt.Errorf("%w (log %s)", err, c.log)
	}
	c.proc, c.http, c.admin = p, p.HTTP, p.Admin
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
func (c *child) alive() error { return c.proc.Alive() }

// readyz returns /readyz's status and body.
func (c *child) readyz(ctx context.Context) (int, string, error) { return c.proc.Readyz(ctx) }

// stop sends SIGTERM and kills the process if it has not exited within grace.
func (c *child) stop(grace time.Duration) {
	if c.proc.Alive() != nil {
		return
	}
	// An API node drains open connections on shutdown: close the idle ones.
	httpClient.CloseIdleConnections()
	c.proc.Stop(syscall.SIGTERM, grace) //nolint:errcheck // the suite reads what went wrong in the log
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

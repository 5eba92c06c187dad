package world

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/marketdata/marketdata/internal/servicetest"

	"github.com/marketdata/marketdata/bench/measure"
)

// Child is the binary under test running as a child process (started by
// servicetest's harness), with its admin server (/readyz, /metrics) on a
// loopback port of the kernel's choosing.
type Child struct {
	// Admin is the admin server's host:port.
	Admin string
	// LogPath receives the child's stdout and stderr.
	LogPath string

	proc *servicetest.Proc
	http *http.Client
}

// StartChild runs bin with args and env added to ours, and waits until its
// /readyz answers 200.
func StartChild(ctx context.Context, bin string, args, env []string, logPath string) (*Child, error) {
	return startChild(ctx, bin, args, env, logPath, false)
}

// startChild is StartChild; withHTTP says the child serves the API and
// logs the address it bound, which its proc's HTTP holds then.
func startChild(ctx context.Context, bin string, args, env []string, logPath string, withHTTP bool) (*Child, error) {
	p, err := servicetest.StartProc(servicetest.ProcOptions{
		Name: "child " + args[0], Bin: bin, Args: args, LogPath: logPath, HTTP: withHTTP,
		Env: append(append(os.Environ(), env...), "MD_ADMIN_ADDR=127.0.0.1:0"),
	})
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx, 30*time.Second); err != nil {
		return nil, fmt.Errorf("%w (see %s)", err, logPath)
	}
	return &Child{Admin: p.Admin, LogPath: logPath, proc: p, http: &http.Client{Timeout: 5 * time.Second}}, nil
}

// FreePort picks a loopback port that is free now; the child binds it soon
// after. It serves the children that take an address and do not report the
// port they bound: the baseline's bare server and the stream anchor. The
// binary under test binds port 0 and logs its addresses (startChild).
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a free port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// Alive returns an error once the child has exited.
func (c *Child) Alive() error { return c.proc.Alive() }

// Pid is the child's process id.
func (c *Child) Pid() int { return c.proc.Pid() }

// Metrics scrapes the child's /metrics.
func (c *Child) Metrics(ctx context.Context) (measure.Scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape /metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape /metrics: status %d: %v", resp.StatusCode, err)
	}
	return measure.ParseMetrics(body), nil
}

// Stop asks the child to finish (SIGTERM: it drains its batch and exits) and
// kills it if it has not within grace. It returns the exit error, if any.
func (c *Child) Stop(grace time.Duration) error {
	return c.proc.Stop(syscall.SIGTERM, grace)
}

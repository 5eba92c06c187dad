package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Child is the binary under test running as a child process, with its admin
// server (/readyz, /metrics) on a loopback port of our choosing.
type Child struct {
	// Admin is the admin server's host:port.
	Admin string
	// LogPath receives the child's stdout and stderr.
	LogPath string

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error // the exit status, once done is closed
	http *http.Client
}

// StartChild runs bin with args and env added to ours, and waits until its
// /readyz answers 200.
func StartChild(ctx context.Context, bin string, args, env []string, logPath string) (*Child, error) {
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("child log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), env...), "MD_ADMIN_ADDR="+admin)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close() //nolint:errcheck // nothing was written; the start error is the one to report
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := &Child{Admin: admin, LogPath: logPath, cmd: cmd, log: f, done: make(chan struct{}),
		http: &http.Client{Timeout: 5 * time.Second}}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	if err := c.waitReady(ctx, 30*time.Second); err != nil {
		c.Stop(5 * time.Second) //nolint:errcheck // the readiness error says more
		return nil, err
	}
	return c, nil
}

// freePort picks a loopback port that is free now; the child binds it soon after.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a free port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

func (c *Child) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := c.Alive(); err != nil {
			return err
		}
		resp, err := c.http.Get("http://" + c.Admin + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained to reuse the connection; the status is the answer
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("child not ready within %s (see %s)", timeout, c.LogPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Alive returns an error once the child has exited.
func (c *Child) Alive() error {
	select {
	case <-c.done:
		return fmt.Errorf("child exited early: %v; last output:\n%s", c.err, c.tail())
	default:
		return nil
	}
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Metrics scrapes the child's /metrics.
func (c *Child) Metrics(ctx context.Context) (Scrape, error) {
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
	return ParseMetrics(body), nil
}

// Stop asks the child to finish (SIGTERM: it drains its batch and exits) and
// kills it if it has not within grace. It returns the exit error, if any.
func (c *Child) Stop(grace time.Duration) error {
	defer c.log.Close() //nolint:errcheck // the child wrote through its own descriptor: closing ours loses nothing
	select {
	case <-c.done:
		return c.err
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return c.err
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
		return errors.New("child did not stop on SIGTERM; killed")
	}
}

// tail is the end of the child's log, for error messages.
func (c *Child) tail() string {
	b, err := os.ReadFile(c.LogPath)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

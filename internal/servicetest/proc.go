package servicetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcOptions say what StartProc runs.
type ProcOptions struct {
	// Name names the process in errors ("ingest", "api1").
	Name string
	// Bin is the marketdata binary (or a test binary that runs as it).
	Bin  string
	Args []string
	// Wrap, when set, is a command and its first arguments that run Bin
	// with Args (`prlimit --nofile=256:256`): the child is Wrap[0] with
	// Wrap[1:], Bin and Args. The wrapper must exec Bin in its own process,
	// as prlimit and env do, so that Pid, signals and the death signal reach
	// the binary itself.
	Wrap []string
	// Env is the process's whole environment (nil: this process's own).
	// MD_ADMIN_ADDR and MD_HTTP_ADDR of 127.0.0.1:0 let the kernel choose
	// the ports: WaitListening reads them back from the log.
	Env []string
	// Log receives the process's stdout and stderr (nil: only the tail is
	// kept, for errors).
	Log io.Writer
	// LogPath, when set, names a file created for the output too; it is
	// closed when the process exits.
	LogPath string
	// HTTP says the process serves the API: WaitListening waits for its
	// "api listening" line too.
	HTTP bool
}

// ErrKilled is what Stop returns when the process outlived its deadline
// and was killed.
var ErrKilled = errors.New("did not stop in time; killed")

// Proc is the marketdata binary running as a child process: the one way a
// test, the cluster suite or mdbench starts it. It dies with the process
// that started it, even when that one is killed.
type Proc struct {
	// Name is ProcOptions.Name.
	Name string
	// Admin and HTTP are the addresses the process bound (host:port), known
	// once WaitListening returned; HTTP is "" for a process without the API.
	Admin, HTTP string

	cmd   *exec.Cmd
	watch *listenWatch
	tail  *tailBuffer
	file  *os.File
	hc    *http.Client

	done chan struct{}
	mu   sync.Mutex
	err  error // the exit status, once done is closed
}

// procTail is how much of a process's output its errors quote.
const procTail = 4 << 10

// StartProc starts the process and returns without waiting for it to
// listen: see WaitListening and WaitReady.
func StartProc(o ProcOptions) (*Proc, error) {
	p := &Proc{Name: o.Name, tail: &tailBuffer{max: procTail}, done: make(chan struct{}),
		watch: newListenWatch(o.HTTP), hc: &http.Client{Timeout: 5 * time.Second}}
	out := []io.Writer{p.tail, p.watch}
	if o.Log != nil {
		out = append(out, o.Log)
	}
	if o.LogPath != "" {
		f, err := os.Create(o.LogPath)
		if err != nil {
			return nil, fmt.Errorf("%s log: %w", o.Name, err)
		}
		p.file = f
		out = append(out, f)
	}
	w := io.MultiWriter(out...)
	argv := append(append(append([]string(nil), o.Wrap...), o.Bin), o.Args...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = o.Env
	p.cmd.Stdout, p.cmd.Stderr = w, w
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// A grandchild that kept the output pipe open must not hold Wait (and
	// with it Stop) once the child itself has exited.
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		p.closeLog()
		return nil, fmt.Errorf("start %s: %w", o.Name, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.closeLog()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *Proc) closeLog() {
	if p.file != nil {
		p.file.Close() //nolint:errcheck // every write went through; nothing is left to flush
	}
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Alive returns an error, with the end of the output, once the process
// has exited.
func (p *Proc) Alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v; last output:\n%s", p.Name, p.exitErr(), p.Tail())
	default:
		return nil
	}
}

func (p *Proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Tail is the end of the process's output.
func (p *Proc) Tail() string { return p.tail.String() }

// WaitListening waits until the log names the addresses the process bound
// (the admin server's, and the API's with ProcOptions.HTTP) and sets Admin
// and HTTP.
func (p *Proc) WaitListening(ctx context.Context, within time.Duration) error {
	select {
	case <-p.watch.found:
	case <-p.done:
		return fmt.Errorf("%s exited before listening: %v; last output:\n%s", p.Name, p.exitErr(), p.Tail())
	case <-time.After(within):
		return fmt.Errorf("%s not listening within %s; last output:\n%s", p.Name, within, p.Tail())
	case <-ctx.Done():
		return ctx.Err()
	}
	p.watch.mu.Lock()
	p.Admin, p.HTTP = p.watch.admin, p.watch.http
	p.watch.mu.Unlock()
	return nil
}

// Readyz returns the status and body of the admin server's /readyz.
func (p *Proc) Readyz(ctx context.Context) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Admin+"/readyz", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body), err
}

// WaitReady waits until /readyz answers 200, the process listening
// already (WaitListening).
func (p *Proc) WaitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last string
	for {
		if err := p.Alive(); err != nil {
			return err
		}
		code, body, err := p.Readyz(ctx)
		if err == nil && code == http.StatusOK {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s (last /readyz: %s); last output:\n%s", p.Name, within, last, p.Tail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling /readyz: the process offers no readiness event
		}
	}
}

// Start is WaitListening then WaitReady, both within one deadline; the
// process is killed if it does not become ready.
func (p *Proc) Start(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	err := p.WaitListening(ctx, within)
	if err == nil {
		err = p.WaitReady(ctx, time.Until(deadline))
	}
	if err != nil {
		p.Stop(syscall.SIGKILL, 5*time.Second) //nolint:errcheck // the readiness error says more
	}
	return err
}

// Stop sends sig and waits up to within for the exit; past it the process
// is killed and Stop returns ErrKilled. Otherwise it returns the exit
// status (nil for 0), also when the process had exited already.
func (p *Proc) Stop(sig os.Signal, within time.Duration) error {
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	p.cmd.Process.Signal(sig) //nolint:errcheck // it may have exited meanwhile; done says when it has
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(within):
		p.cmd.Process.Kill() //nolint:errcheck // as above
		<-p.done
		return fmt.Errorf("%s: %w", p.Name, ErrKilled)
	}
}

// tailBuffer keeps the last max bytes written to it, from a line's start.
type tailBuffer struct {
	max int
	mu  sync.Mutex
	b   []byte
}

// Write never fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > t.max {
		b = b[len(b)-t.max:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

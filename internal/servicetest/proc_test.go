package servicetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shProc starts sh -c script as a Proc.
func shProc(t *testing.T, script string, o ProcOptions) *Proc {
	t.Helper()
	o.Name, o.Bin, o.Args = "sh", "/bin/sh", []string{"-c", script}
	p, err := StartProc(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(syscall.SIGKILL, 5*time.Second) }) //nolint:errcheck // the test has its answer
	return p
}

// TestProcListeningAndExit: the addresses come from the log, the output
// reaches the log file, and a process that ignores SIGTERM is killed past
// its deadline.
func TestProcListeningAndExit(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "p.log")
	p := shProc(t, `trap '' TERM
echo '{"msg":"admin listening","addr":"127.0.0.1:1111"}'
echo '{"msg":"api listening","addr":"127.0.0.1:2222"}'
while :; do sleep 0.05; done`, ProcOptions{HTTP: true, LogPath: logPath})
	if err := p.WaitListening(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Admin != "127.0.0.1:1111" || p.HTTP != "127.0.0.1:2222" {
		t.Fatalf("addresses %q %q, want 127.0.0.1:1111 127.0.0.1:2222", p.Admin, p.HTTP)
	}
	if err := p.Alive(); err != nil {
		t.Fatalf("Alive: %v", err)
	}
	if err := p.Stop(syscall.SIGTERM, 200*time.Millisecond); !errors.Is(err, ErrKilled) {
		t.Fatalf("Stop of a process ignoring SIGTERM: %v, want ErrKilled", err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(b), "api listening") {
		t.Fatalf("log file: %q %v, want the output", b, err)
	}
}

// TestProcExitBeforeListening: a process that exits at once is reported
// with its status and output, by WaitListening and Alive.
func TestProcExitBeforeListening(t *testing.T) {
	p := shProc(t, "echo broken config; exit 3", ProcOptions{})
	err := p.WaitListening(context.Background(), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "broken config") {
		t.Fatalf("WaitListening: %v, want the exit status and the output", err)
	}
	<-p.Done()
	if err := p.Alive(); err == nil {
		t.Fatal("Alive after the exit: nil")
	}
	if err := p.Stop(syscall.SIGTERM, time.Second); err == nil || errors.Is(err, ErrKilled) {
		t.Fatalf("Stop after the exit: %v, want the exit status", err)
	}
	if err := p.Start(context.Background(), time.Second); err == nil {
		t.Fatal("Start of an exited process: nil")
	}
}

// TestProcWrap: the binary runs under the wrapper, with its arguments, in
// the wrapper's process (env execs it: Pid is the binary's).
func TestProcWrap(t *testing.T) {
	p := shProc(t, `echo "wrapped=$WRAPPED pid=$$"; echo '{"msg":"admin listening","addr":"127.0.0.1:1111"}'
while :; do sleep 0.05; done`, ProcOptions{Wrap: []string{"env", "WRAPPED=yes"}})
	if err := p.WaitListening(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("wrapped=yes pid=%d\n", p.Pid()); !strings.Contains(p.Tail(), want) {
		t.Fatalf("output %q, want %q", p.Tail(), want)
	}
}

// TestTailBuffer keeps the last bytes from a line's start.
func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 16}
	for range 10 {
		b.Write([]byte("line of text\n")) //nolint:errcheck // never fails
	}
	got := b.String()
	if got != "line of text\n" {
		t.Fatalf("tail %q, want the last whole line", got)
	}
}

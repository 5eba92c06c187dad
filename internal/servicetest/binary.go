// Package servicetest runs the real marketdata service for tests of its
// users (the Go client, its stream): the `marketdata` binary built from this
// module, one `ingest` worker and N `api` nodes as child processes, on a
// world of the test's own (a fresh Postgres database, a Redis prefix, NATS
// stream, subject and consumer names). Tests publish matcher messages
// (contract §4) to the world's subjects and wait until the API serves them,
// create accounts and keys with the CLI, and stop, kill and restart API
// nodes on their ports.
//
// Its Proc (StartProc) is the one way anything starts the binary as a
// child process: Service's nodes, the cluster suite, the drills, ingest's
// SIGKILL test, the edge test (under prlimit, ProcOptions.Wrap) and the
// mdbench benchmarks all use it. Everything else is imported by tests
// only. Under -short every Start skips the test (testenv.Integration); a
// missing service skips it outside CI and fails it with CI=true
// (testenv.Unavailable).
package servicetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The binary is built once per test process, into a directory shared by all
// test processes of the machine (each builds its own file: two packages'
// tests run at once). Files left there by test processes older than a day
// are removed by the next build; a test process cannot remove its own at
// exit without a TestMain, and a day outlasts any test run.
var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

const staleBinaryAge = 24 * time.Hour

// Binary returns the path of the `marketdata` binary built from the module
// the test runs in, building it on the first call of the process.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("servicetest: build marketdata: %v", buildErr)
	}
	return buildPath
}

func build() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is not in PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	root := filepath.Dir(gomod)
	dir := filepath.Join(os.TempDir(), "marketdata-servicetest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	removeStale(dir)
	path := filepath.Join(dir, "marketdata-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", path, "./cmd/marketdata")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/marketdata in %s: %w\n%s", root, err, stderr.String())
	}
	return path, nil
}

// removeStale removes binaries older than staleBinaryAge from dir.
func removeStale(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleBinaryAge {
			continue
		}
		os.Remove(filepath.Join(dir, e.Name())) //nolint:errcheck // best effort: another process may have removed it
	}
}

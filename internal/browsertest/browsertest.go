// Package browsertest drives headless Chromium (Debian's chromium package,
// installed by deploy/local/chromium.sh) for the docs site's browser tests:
// the layout test and the candles chart in docs/site, and the try-it panel
// against a live API in cmd/marketdata. It is imported by tests only.
package browsertest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/marketdata/marketdata/internal/testenv"
)

// ChromiumPath is where Debian's chromium package puts the browser.
const ChromiumPath = "/usr/bin/chromium"

// Timeout bounds Chromium's start and each step in the browser (generous:
// the CI machine is loaded).
const Timeout = 90 * time.Second

// Start starts headless Chromium with a fresh profile and a 1440×1000
// window; it is closed when the test ends, and a failed test leaves a
// picture of the page under ArtifactsDir. Under -short the test skips;
// without Chromium it skips, or fails in CI (testenv.Unavailable).
func Start(t *testing.T) context.Context {
	t.Helper()
	testenv.Integration(t, "Chromium")
	if _, err := os.Stat(ChromiumPath); err != nil {
		testenv.Unavailable(t, "Chromium ("+ChromiumPath+", Debian package chromium: deploy/local/chromium.sh)", err)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(ChromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	// The first call starts the browser, which lives as long as ctx, so it
	// cannot take a context with a deadline: a watchdog bounds it instead
	// (a hung start would otherwise wait for go test's own timeout).
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	case <-time.After(Timeout):
		cancelCtx()
		cancelAlloc()
		t.Fatalf("chromium (%s) did not start within %v", ChromiumPath, Timeout)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(90))
		if err != nil {
			t.Logf("screenshot of the failed test: %v", err)
			return
		}
		path := filepath.Join(ArtifactsDir(t), strings.ReplaceAll(t.Name(), "/", "_")+"-failed.png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Logf("screenshot of the failed test: %v", err)
			return
		}
		t.Logf("screenshot of the failed test: %s", path)
	})
	return ctx
}

// Step runs the actions, bounded by Timeout.
func Step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s (bounded by %v): %v", what, Timeout, err)
	}
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s (bounded by %v): %v", expr, Timeout, err)
	}
	return v
}

// EvalVoid is an action that evaluates expr for its effect.
func EvalVoid(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[any](expr)(ctx, tg)
		return chromedp.Void{}, err
	}
}

// ArtifactsDir is where browser tests save screenshots: $MD_TEST_ARTIFACTS,
// else test-artifacts/ at the repository's root (the tests that use it run
// two folders below it).
func ArtifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MD_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifacts folder: %v", err)
	}
	return dir
}

// Screenshot saves the window as the reader sees it under ArtifactsDir.
func Screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(ArtifactsDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

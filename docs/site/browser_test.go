package site

// The page's layout in a real browser: headless Chromium (Debian's package,
// installed by deploy/local/chromium.sh) loads the site and measures what
// only a browser can, on a phone-sized screen and a wide one. The try-it
// panel against a live API is cmd/marketdata's TestDocsSiteInBrowser.

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/marketdata/marketdata/internal/testenv"
)

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// browserTimeout bounds Chromium's start and each step (generous: the CI
// machine is loaded).
const browserTimeout = 90 * time.Second

// TestSiteLayoutInBrowser: at 375 px wide, code in the reference's tables
// (an error code like ip_not_allowed) stays on one line and a table too
// wide scrolls inside its box, not the page; on a wide screen the contents
// mark the section in view, and the one picked from them.
func TestSiteLayoutInBrowser(t *testing.T) {
	testenv.Integration(t, "Chromium")
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Unavailable(t, "Chromium ("+chromiumPath+", Debian package chromium: deploy/local/chromium.sh)", err)
	}
	srv := httptest.NewServer(newSite(t))
	t.Cleanup(srv.Close)
	ctx := startBrowser(t)

	t.Run("narrow screen keeps code whole", func(t *testing.T) {
		run(t, ctx, "load the site at 375 px",
			chromedp.EmulateViewport(375, 800),
			chromedp.Navigate(srv.URL+"/"),
			chromedp.WaitVisible(chromedp.ID("concepts")),
		)
		var got struct {
			Broken        []string // code without spaces in a table cell, on more than one line
			ErrorCodes    int      // ip_not_allowed in the errors table
			ErrorCodeRows int      // its line boxes
			PageWidth     int
			ViewWidth     int
		}
		measure := `(() => {
			const out = {Broken: [], ErrorCodes: 0, ErrorCodeRows: 0,
				PageWidth: document.documentElement.scrollWidth, ViewWidth: window.innerWidth};
			for (const c of document.querySelectorAll("td code")) {
				const rows = c.getClientRects().length;
				if (rows === 0 || /\s/.test(c.textContent)) { continue; }
				if (rows !== 1) { out.Broken.push(c.textContent + " (" + rows + " lines)"); }
			}
			for (const c of document.querySelectorAll("#concepts td code")) {
				if (c.textContent === "ip_not_allowed") {
					out.ErrorCodes++;
					out.ErrorCodeRows = c.getClientRects().length;
				}
			}
			return JSON.stringify(out);
		})()`
		if err := json.Unmarshal([]byte(evaluate[string](t, ctx, measure)), &got); err != nil {
			t.Fatal(err)
		}
		if got.ViewWidth != 375 {
			t.Fatalf("viewport %d px wide, want 375", got.ViewWidth)
		}
		if got.ErrorCodes != 1 || got.ErrorCodeRows != 1 {
			t.Errorf("ip_not_allowed in the errors table: found %d times, on %d lines; want once, on 1 line", got.ErrorCodes, got.ErrorCodeRows)
		}
		if len(got.Broken) > 0 {
			t.Errorf("code broken across lines in tables at 375 px: %q", got.Broken)
		}
		if got.PageWidth > got.ViewWidth {
			t.Errorf("the page is %d px wide in a %d px viewport: something does not fit and does not scroll in its own box", got.PageWidth, got.ViewWidth)
		}
		run(t, ctx, "scroll to the errors table",
			evalVoid(`document.getElementById("errors").scrollIntoView({block: "start"})`))
		screenshot(t, ctx, "docs-narrow-errors.png")
	})

	t.Run("contents mark where the reader is", func(t *testing.T) {
		run(t, ctx, "load the site at 1440 px",
			chromedp.EmulateViewport(1440, 1000),
			chromedp.Navigate(srv.URL+"/"),
			chromedp.WaitVisible(chromedp.ID("concepts")),
			evalVoid(`document.getElementById("op-getKey").scrollIntoView({block: "start"})`),
			chromedp.WaitVisible(chromedp.CSS(`nav.toc a[href="#op-getKey"][aria-current="location"]`)),
			chromedp.Click(chromedp.CSS(`nav.toc a[href="#schemas"]`)),
			chromedp.WaitVisible(chromedp.CSS(`nav.toc a[href="#schemas"][aria-current="location"]`)),
		)
		marked := evaluate[[]string](t, ctx, `Array.from(document.querySelectorAll("nav.toc a[aria-current]"), a => a.getAttribute("href"))`)
		if len(marked) != 1 || marked[0] != "#schemas" {
			t.Errorf("contents mark %q after picking Schemas, want only #schemas", marked)
		}
		// The mark is visible, not only announced.
		if bg := evaluate[string](t, ctx, `getComputedStyle(document.querySelector('nav.toc a[aria-current]')).backgroundColor`); bg == "rgba(0, 0, 0, 0)" {
			t.Error("the marked link looks like the others (no background)")
		}
		screenshot(t, ctx, "docs-contents-current.png")
	})
}

// startBrowser starts headless Chromium with a fresh profile, closed when
// the test ends.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
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
	// The first call starts the browser, which lives as long as ctx: it
	// cannot take a deadline, so a watchdog bounds it.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	case <-time.After(browserTimeout):
		cancelCtx()
		cancelAlloc()
		t.Fatalf("chromium (%s) did not start within %v", chromiumPath, browserTimeout)
	}
	return ctx
}

// run runs the browser actions, bounded by browserTimeout.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s (bounded by %v): %v", what, browserTimeout, err)
	}
}

// evaluate evaluates a JavaScript expression in the page.
func evaluate[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// evalVoid is an action that evaluates expr for its effect.
func evalVoid(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[any](expr)(ctx, tg)
		return chromedp.Void{}, err
	}
}

// screenshot saves the window as the reader sees it under
// $MD_TEST_ARTIFACTS, else test-artifacts/ at the repository's root.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("MD_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

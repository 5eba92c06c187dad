package site

// The page's layout in a real browser: headless Chromium (Debian's package,
// installed by deploy/local/chromium.sh) loads the site and measures what
// only a browser can, on a phone-sized screen and a wide one. The try-it
// panel against a live API is cmd/marketdata's TestDocsSiteInBrowser.

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/marketdata/marketdata/internal/browsertest"
)

// TestSiteLayoutInBrowser: at 375 px wide, code in the reference's tables
// (an error code like ip_not_allowed) stays on one line and a table too
// wide scrolls inside its box, not the page; on a wide screen the contents
// mark the section in view, and the one picked from them.
func TestSiteLayoutInBrowser(t *testing.T) {
	srv := httptest.NewServer(newSite(t))
	t.Cleanup(srv.Close)
	ctx := browsertest.Start(t)

	t.Run("narrow screen keeps code whole", func(t *testing.T) {
		browsertest.Step(t, ctx, "load the site at 375 px",
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
		if err := json.Unmarshal([]byte(browsertest.Eval[string](t, ctx, measure)), &got); err != nil {
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
		browsertest.Step(t, ctx, "scroll to the errors table",
			browsertest.EvalVoid(`document.getElementById("errors").scrollIntoView({block: "start"})`))
		browsertest.Screenshot(t, ctx, "docs-narrow-errors.png")
	})

	t.Run("contents mark where the reader is", func(t *testing.T) {
		browsertest.Step(t, ctx, "load the site at 1440 px",
			chromedp.EmulateViewport(1440, 1000),
			chromedp.Navigate(srv.URL+"/"),
			chromedp.WaitVisible(chromedp.ID("concepts")),
			browsertest.EvalVoid(`document.getElementById("op-getKey").scrollIntoView({block: "start"})`),
			chromedp.WaitVisible(chromedp.CSS(`nav.toc a[href="#op-getKey"][aria-current="location"]`)),
			chromedp.Click(chromedp.CSS(`nav.toc a[href="#schemas"]`)),
			chromedp.WaitVisible(chromedp.CSS(`nav.toc a[href="#schemas"][aria-current="location"]`)),
		)
		marked := browsertest.Eval[[]string](t, ctx, `Array.from(document.querySelectorAll("nav.toc a[aria-current]"), a => a.getAttribute("href"))`)
		if len(marked) != 1 || marked[0] != "#schemas" {
			t.Errorf("contents mark %q after picking Schemas, want only #schemas", marked)
		}
		// The mark is visible, not only announced.
		if bg := browsertest.Eval[string](t, ctx, `getComputedStyle(document.querySelector('nav.toc a[aria-current]')).backgroundColor`); bg == "rgba(0, 0, 0, 0)" {
			t.Error("the marked link looks like the others (no background)")
		}
		browsertest.Screenshot(t, ctx, "docs-contents-current.png")
	})
}

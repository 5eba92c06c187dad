package main

// The documentation site in a real browser: headless Chromium (Debian's
// package, installed by deploy/local/chromium.sh) loads the site from the
// docs origin, sends requests with a real key to an API node on another
// origin, and reads the answer through CORS; the same site opened from an
// origin the API does not allow cannot read it.

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/marketdata/marketdata/internal/browsertest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// listenDocs binds a port for a docs server before anything needs its
// origin, so that no other process can take the port in between.
func listenDocs(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen for docs: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() }) // in case no server took it over
	return ln
}

// startDocs runs the docs server in-process on ln; stopped when the test
// ends.
func startDocs(t *testing.T, d *drill, ln net.Listener, apiURL string) string {
	t.Helper()
	cfg := d.config()
	cfg.DocsAddr, cfg.DocsAPIURLs = ln.Addr().String(), []string{apiURL}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- runDocsOn(ctx, ln, cfg, d.logger(), func(a string) { ready <- a }) }()
	var bound string
	select {
	case bound = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("docs exited at start: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("docs not listening 10 s after start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("docs stopped with: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("docs did not stop within 15 s")
		}
	})
	return "http://" + bound
}

// panelAnswer is what the try-it panel shows after a send.
type panelAnswer struct {
	Status    string // data-status: the HTTP status, or "failed"
	Text      string // the status line
	Remaining string // RateLimit-Remaining as shown ("" when absent)
	Limit     string
	RequestID string
	Body      string
}

// sendFromPanel picks route, fills fields (input id suffix → value), sends,
// and waits for the panel's answer.
func sendFromPanel(t *testing.T, ctx context.Context, route string, fields map[string]string) panelAnswer {
	t.Helper()
	actions := []chromedp.Action[chromedp.Void]{
		chromedp.SetValue(chromedp.ID("tryit-route"), route),
		browsertest.EvalVoid(`document.getElementById("tryit-route").dispatchEvent(new Event("change"))`),
	}
	for name, v := range fields {
		sel := chromedp.ID("tryit-f-" + route + "-" + name)
		actions = append(actions, chromedp.SetValue(sel, ""), chromedp.SendKeys(sel, v))
	}
	// Removing the mark of the last answer tells this send's answer apart.
	actions = append(actions,
		browsertest.EvalVoid(`document.getElementById("tryit-status").removeAttribute("data-status")`),
		chromedp.Click(chromedp.ID("tryit-send")),
		chromedp.WaitVisible(chromedp.CSS(`#tryit-status[data-status]`)),
	)
	browsertest.Step(t, ctx, "send "+route+" from the panel", actions...)
	header := func(name string) string {
		return browsertest.Eval[string](t, ctx, `document.querySelector('[data-header="`+name+`"]').getAttribute("data-value") || ""`)
	}
	return panelAnswer{
		Status:    browsertest.Eval[string](t, ctx, `document.getElementById("tryit-status").getAttribute("data-status")`),
		Text:      browsertest.Eval[string](t, ctx, `document.getElementById("tryit-status").textContent`),
		Remaining: header("RateLimit-Remaining"),
		Limit:     header("RateLimit-Limit"),
		RequestID: header("X-Request-Id"),
		Body:      browsertest.Eval[string](t, ctx, `document.getElementById("tryit-body").textContent`),
	}
}

// screenshots saves two PNGs under the artifacts folder: name.png, the
// full page, and name-panel.png, the window as the user sees it with the
// panel's answer scrolled into view.
func screenshots(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	full, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	browsertest.Step(t, ctx, "scroll to the answer", browsertest.EvalVoid(`document.getElementById("tryit-result").scrollIntoView({block: "end"})`))
	view, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := browsertest.ArtifactsDir(t)
	for file, png := range map[string][]byte{name + ".png": full, name + "-panel.png": view} {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
}

// TestDocsSiteInBrowser: the try-it panel of the site served on the docs
// origin calls the API node on another origin with a pasted key and shows
// the 200, the RateLimit-Remaining header (counting down) and the body;
// the key is kept nowhere but the page's memory; served from an origin the
// API does not allow, the page cannot read the answer and says so.
func TestDocsSiteInBrowser(t *testing.T) {
	testenv.Integration(t, "PostgreSQL, Redis, NATS and Chromium")
	if _, err := os.Stat(browsertest.ChromiumPath); err != nil {
		testenv.Unavailable(t, "Chromium ("+browsertest.ChromiumPath+", Debian package chromium: deploy/local/chromium.sh)", err)
	}
	d := newDrill(t, testenv.Database(t), "", "")
	d.sharedRedis()
	d.sharedNATS()
	// The docs port first: the API node allows exactly this origin.
	docsLn := listenDocs(t)
	d.env["MD_DOCS_ORIGIN"] = "http://" + docsLn.Addr().String()
	d.env["MD_RATE_LIMIT"] = "1000"
	// One window for the whole test: with the default 60 s fixed windows a
	// window boundary between two sends would reset the count the test
	// expects to go down.
	d.env["MD_RATE_WINDOW"] = "24h"
	d.migrate()
	d.startIngest()
	d.feed(300)
	d.caughtUp(60 * time.Second)
	keyID, secret := d.newKey()
	api := d.startAPI()
	apiURL := "http://" + api.http

	// What the API answers directly: the page must show the same data.
	var direct struct {
		Data []struct {
			UniversalID string `json:"universal_id"`
		} `json:"data"`
	}
	code, body, err := get(http.DefaultClient, api.http, "/public/v1/events?limit=3", secret)
	if err != nil || code != 200 {
		t.Fatalf("GET /events directly: %d %s %v", code, body, err)
	}
	if err := json.Unmarshal([]byte(body), &direct); err != nil || len(direct.Data) == 0 {
		t.Fatalf("GET /events directly: no events (%v): %s", err, body)
	}

	originA := startDocs(t, d, docsLn, apiURL)
	if originA != d.env["MD_DOCS_ORIGIN"] {
		t.Fatalf("docs served at %s, want %s", originA, d.env["MD_DOCS_ORIGIN"])
	}
	ctx := browsertest.Start(t)
	browsertest.Step(t, ctx, "load the site from "+originA,
		chromedp.Navigate(originA+"/"),
		chromedp.WaitVisible(chromedp.ID("tryit-ui")),
		chromedp.SendKeys(chromedp.ID("tryit-api-key"), secret),
	)
	if browsertest.Eval[bool](t, ctx, `!document.getElementById("tryit-origin-warning").hidden`) {
		t.Error("the page served on MD_DOCS_ORIGIN warns about its origin")
	}

	first := sendFromPanel(t, ctx, "listEvents", map[string]string{"limit": "3"})
	t.Logf("first send: %+v", first)
	if first.Status != "200" {
		t.Fatalf("panel status %q (%s), want 200", first.Status, first.Text)
	}
	var shown struct {
		Data []struct {
			UniversalID string `json:"universal_id"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(first.Body), &shown); err != nil {
		t.Fatalf("panel body is not the JSON answer: %v\n%s", err, first.Body)
	}
	if len(shown.Data) != 3 || shown.Data[0].UniversalID != direct.Data[0].UniversalID {
		t.Errorf("panel shows events %+v, the API answers %+v", shown.Data, direct.Data)
	}
	if first.Limit != "1000" {
		t.Errorf("RateLimit-Limit shown %q, want 1000", first.Limit)
	}
	if first.RequestID == "" {
		t.Error("X-Request-Id not shown")
	}
	r1, err := strconv.Atoi(first.Remaining)
	if err != nil {
		t.Fatalf("RateLimit-Remaining shown %q: not a number", first.Remaining)
	}

	// The panel checks nothing the API checks: a limit out of range is
	// sent as typed, and the API's 422 is shown, counted in the window.
	invalid := sendFromPanel(t, ctx, "listEvents", map[string]string{"limit": "101"})
	t.Logf("invalid send: %+v", invalid)
	if invalid.Status != "422" || !strings.Contains(invalid.Body, `"code": "invalid_request"`) {
		t.Errorf("limit=101: panel shows %q with body %s; want the API's 422 invalid_request", invalid.Status, invalid.Body)
	}
	r2, err := strconv.Atoi(invalid.Remaining)
	if err != nil || r2 >= r1 {
		t.Errorf("RateLimit-Remaining %q after %d: want a smaller number", invalid.Remaining, r1)
	}

	second := sendFromPanel(t, ctx, "getKey", nil)
	t.Logf("second send: %+v", second)
	if second.Status != "200" {
		t.Fatalf("panel status %q (%s), want 200", second.Status, second.Text)
	}
	if !strings.Contains(second.Body, `"key_id": "`+keyID+`"`) || !strings.Contains(second.Body, `"last4": "`+secret[len(secret)-4:]+`"`) {
		t.Errorf("panel body of /key lacks the key's id %s or last4:\n%s", keyID, second.Body)
	}
	if r3, err := strconv.Atoi(second.Remaining); err != nil || r3 >= r2 {
		t.Errorf("RateLimit-Remaining %q after %d: want a smaller number", second.Remaining, r2)
	}

	// An API the operator did not list is refused by the page (its CSP
	// would refuse the connection anyway), saying which it may call.
	browsertest.Step(t, ctx, "point the panel at another API", chromedp.SetValue(chromedp.ID("tryit-api-url"), "http://127.0.0.1:1"))
	elsewhere := sendFromPanel(t, ctx, "getKey", nil)
	if elsewhere.Status != "invalid" || !strings.Contains(elsewhere.Text, "only to "+apiURL) {
		t.Errorf("a not-listed API: panel shows %q (%s); want a refusal naming %s", elsewhere.Status, elsewhere.Text, apiURL)
	}
	browsertest.Step(t, ctx, "point the panel back", chromedp.SetValue(chromedp.ID("tryit-api-url"), apiURL))
	again := sendFromPanel(t, ctx, "getKey", nil)
	if again.Status != "200" {
		t.Errorf("back on the listed API: panel shows %q (%s)", again.Status, again.Text)
	}

	// A key pasted into a field that goes into the URL is refused (URLs are
	// logged), and so is a dot segment the URL would resolve to another route.
	for _, c := range []struct{ what, value, want string }{
		{"the key", secret, "looks like an API key"},
		{"..", "..", "another route"},
	} {
		value, want := c.value, c.want
		browsertest.Step(t, ctx, "type into universal_id",
			browsertest.EvalVoid(`document.getElementById("tryit-route").value = "getEvent"; document.getElementById("tryit-route").dispatchEvent(new Event("change"))`),
			chromedp.WaitVisible(chromedp.ID("tryit-f-getEvent-universal_id")),
			browsertest.EvalVoid(`document.getElementById("tryit-f-getEvent-universal_id").value = ""`),
			chromedp.SendKeys(chromedp.ID("tryit-f-getEvent-universal_id"), value),
		)
		refusedField := sendFromPanel(t, ctx, "getEvent", nil)
		if refusedField.Status != "invalid" || !strings.Contains(refusedField.Text, want) {
			t.Errorf("universal_id %s: panel shows %q (%s); want a refusal saying %q", c.what, refusedField.Status, refusedField.Text, want)
		}
	}

	// The key is in no storage, cookie, URL or history entry of the page.
	kept := browsertest.Eval[string](t, ctx, `JSON.stringify({
		local: Object.entries(localStorage), session: Object.entries(sessionStorage),
		cookie: document.cookie, href: location.href, state: history.state,
		html: document.documentElement.outerHTML})`)
	if strings.Contains(kept, secret) || strings.Contains(kept, secret[9:]) {
		t.Error("the key is kept in storage, a cookie, the URL, the history or the page's markup")
	}
	screenshots(t, ctx, "docs-origin-allowed")

	// The same site from an origin the API does not allow: the request is
	// preflighted (Authorization), the preflight gets 400, so the browser
	// never sends the GET and the page gets no answer.
	originB := startDocs(t, d, listenDocs(t), apiURL)
	browsertest.Step(t, ctx, "load the site from "+originB,
		chromedp.Navigate(originB+"/"),
		chromedp.WaitVisible(chromedp.ID("tryit-ui")),
		chromedp.SendKeys(chromedp.ID("tryit-api-key"), secret),
	)
	refused := sendFromPanel(t, ctx, "getKey", nil)
	t.Logf("send from %s: %+v", originB, refused)
	if refused.Status != "failed" || !strings.Contains(refused.Text, "could not read the answer") {
		t.Errorf("from a not-allowed origin the panel shows %q (%s); want the CORS failure", refused.Status, refused.Text)
	}
	if refused.Body != "" || refused.Remaining != "" {
		t.Errorf("from a not-allowed origin the panel shows a body %q or RateLimit-Remaining %q", refused.Body, refused.Remaining)
	}
	if !browsertest.Eval[bool](t, ctx, `!document.getElementById("tryit-origin-warning").hidden`) {
		t.Error("the page on a not-allowed origin does not warn about its origin")
	}
	screenshots(t, ctx, "docs-origin-refused")

	// The API was up all along: the same send from the allowed origin right
	// after is answered, so B's failure is CORS, not a dead API.
	browsertest.Step(t, ctx, "load the site from "+originA+" again",
		chromedp.Navigate(originA+"/"),
		chromedp.WaitVisible(chromedp.ID("tryit-ui")),
		chromedp.SendKeys(chromedp.ID("tryit-api-key"), secret),
	)
	back := sendFromPanel(t, ctx, "getKey", nil)
	t.Logf("send from %s after: %+v", originA, back)
	if back.Status != "200" {
		t.Errorf("from the allowed origin after the refused send: panel shows %q (%s), want 200", back.Status, back.Text)
	}
}

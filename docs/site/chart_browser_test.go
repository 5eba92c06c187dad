package site

// The candles chart of the try-it panel (assets/chart.js) in a real
// browser, against the real service: prices and trades go in as matcher
// messages through ingest (internal/servicetest: the marketdata binary's
// ingest worker and API node on the test's own database, Redis prefix and
// streams), the page's panel asks the candles route for them, and the
// chart must draw what the API answered. Candles are read only through the
// HTTP route, never from their tables.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/marketdata/marketdata/docs"
	"github.com/marketdata/marketdata/internal/browsertest"
	"github.com/marketdata/marketdata/internal/servicetest"
)

// TestChartMarkup: the form of the route whose 200 body is a CandleList
// (listCandles) is marked for the chart and no other is; the page has the
// chart's figure inside the answer; every id chart.js looks up is there.
func TestChartMarkup(t *testing.T) {
	_, page := get(t, newSite(t), http.MethodGet, "/")
	marked := regexp.MustCompile(`<fieldset class="form" data-op="([^"]+)"[^>]* data-chart="candles"`).FindAllStringSubmatch(page, -1)
	if len(marked) != 1 || marked[0][1] != "listCandles" {
		t.Errorf("forms marked data-chart=\"candles\": %q, want listCandles only", marked)
	}
	if !regexp.MustCompile(`(?s)<section id="tryit-result"[^>]*>.*<figure id="tryit-chart" class="chart" hidden></figure>.*</section>`).MatchString(page) {
		t.Error("no hidden figure#tryit-chart in #tryit-result")
	}
	_, js := get(t, newSite(t), http.MethodGet, "/static/chart.js")
	looked := regexp.MustCompile(`getElementById\("([^"]+)"\)`).FindAllStringSubmatch(js, -1)
	if len(looked) != 2 {
		t.Fatalf("chart.js looks up %d ids, want 2 (the pattern is stale?)", len(looked))
	}
	for _, m := range looked {
		if !strings.Contains(page, ` id="`+m[1]+`"`) {
			t.Errorf("chart.js looks up id %q, which is not on the page", m[1])
		}
	}
}

// candle is a candle of the API's answer, as far as the chart uses it.
type candle struct {
	Start  string `json:"start"`
	Trades int    `json:"trades"`
	Trade  *struct {
		Open  float64 `json:"open"`
		Close float64 `json:"close"`
	} `json:"trade"`
	Bid *struct {
		Close *float64 `json:"close"`
	} `json:"bid"`
}

// feedCandles publishes, through ingest, a market with 12 one-minute
// buckets of data ending a minute before now: trades in every bucket but
// the 5th and 9th (three each), and prices from the 2nd bucket on (so the
// first has trades but no bid or ask). It returns the market's id and the
// range's from and to.
func feedCandles(t *testing.T, s *servicetest.Service) (market string, from, to time.Time) {
	t.Helper()
	s.PutEvent(&servicetest.Event{ID: "chart-ev", Title: "Will the chart draw?", Venues: [4]string{"A-ev", "B-ev", "", ""}})
	market = "chart-ev-m1"
	s.PutMarket(&servicetest.Market{ID: market, EventID: "chart-ev", Title: "Yes",
		Venues: map[string]string{"venue_a": "A-m1", "venue_b": "B-m1"}})
	from = time.Now().UTC().Truncate(time.Minute).Add(-13 * time.Minute)
	mid := []float64{0.42, 0.44, 0.43, 0.47, 0.50, 0.48, 0.46, 0.49, 0.53, 0.55, 0.52, 0.56}
	for i, m := range mid {
		at := from.Add(time.Duration(i) * time.Minute)
		if i > 0 {
			s.PublishPrice(&servicetest.Price{MarketID: market, TS: at.Add(5 * time.Second), Quotes: map[string]servicetest.Quote{
				"venue_a": {Bid: m - 0.02, Ask: m + 0.02, Last: m, Volume24h: 100},
				"venue_b": {Bid: m - 0.03, Ask: m + 0.01, Last: m, Volume24h: 80},
			}})
		}
		if i == 4 || i == 8 {
			continue
		}
		closeAt := m + 0.012
		if i%3 == 0 {
			closeAt = m - 0.015
		}
		spike := m + 0.02 // a high or a low outside open and close: a wick
		if i%2 == 1 {
			spike = m - 0.025
		}
		for j, p := range []float64{m - 0.01, spike, closeAt} {
			s.PublishTrade(&servicetest.Trade{MarketID: market, TradeID: fmt.Sprintf("chart-%02d-%d", i, j), Venue: servicetest.Venues[j],
				Price: p, Size: float64(1 + i%3), Side: []string{"buy", "sell"}[j%2], TS: at.Add(time.Duration(15+15*j) * time.Second)})
		}
	}
	return market, from, from.Add(12 * time.Minute)
}

// getCandles reads the candles route directly, as any client would.
func getCandles(t *testing.T, base, secret, path string) (int, []candle, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return res.StatusCode, nil, fmt.Errorf("%v %s", err, body)
	}
	var page struct {
		Data []candle `json:"data"`
	}
	return res.StatusCode, page.Data, json.Unmarshal(body, &page)
}

// sendCandles fills the panel's candles form and sends it; it returns the
// status the panel shows.
func sendCandles(t *testing.T, ctx context.Context, market, interval string, from, to time.Time) string {
	t.Helper()
	f := func(name string) chromedp.ID { return chromedp.ID("tryit-f-listCandles-" + name) }
	browsertest.Step(t, ctx, "send the candles of "+market+" from the panel",
		chromedp.SetValue(chromedp.ID("tryit-route"), "listCandles"),
		browsertest.EvalVoid(`document.getElementById("tryit-route").dispatchEvent(new Event("change"))`),
		chromedp.SetValue(f("universal_id"), market),
		chromedp.SetValue(f("interval"), interval),
		chromedp.SetValue(f("from"), from.Format(time.RFC3339)),
		chromedp.SetValue(f("to"), to.Format(time.RFC3339)),
		browsertest.EvalVoid(`document.getElementById("tryit-status").removeAttribute("data-status")`),
		chromedp.Click(chromedp.ID("tryit-send")),
		chromedp.WaitVisible(chromedp.CSS(`#tryit-status[data-status]`)),
	)
	return browsertest.Eval[string](t, ctx, `document.getElementById("tryit-status").getAttribute("data-status")`)
}

// drawn is what the chart shows, read from the page.
type drawn struct {
	Candles, TradeCandles string // the figure's data-candles, data-trade-candles
	Groups                []string
	Bodies                []string // each trade body's class, in order
	BidSteps, AskSteps    int      // the bid's and ask's horizontal segments
	Label, Caption, Empty string
	Hidden                bool
}

const readChart = `(() => {
	const f = document.getElementById("tryit-chart"), q = s => Array.from(f.querySelectorAll(s));
	const steps = s => { const p = f.querySelector(s); return p ? (p.getAttribute("d").match(/H/g) || []).length : 0; };
	const svg = f.querySelector("svg"), cap = f.querySelector("figcaption"), empty = f.querySelector(".chart-empty");
	return JSON.stringify({Candles: f.getAttribute("data-candles") || "", TradeCandles: f.getAttribute("data-trade-candles") || "",
		Groups: q("g.candle").map(g => g.getAttribute("data-start")),
		Bodies: q("g.candle rect.body").map(r => r.getAttribute("class")),
		BidSteps: steps("path.bid"), AskSteps: steps("path.ask"),
		Label: svg ? svg.getAttribute("aria-label") : "", Caption: cap ? cap.textContent : "",
		Empty: empty ? empty.textContent : "", Hidden: f.hidden});
})()`

func readDrawn(t *testing.T, ctx context.Context) drawn {
	t.Helper()
	var d drawn
	if err := json.Unmarshal([]byte(browsertest.Eval[string](t, ctx, readChart)), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCandlesChartInBrowser: the try-it panel's candles answer is drawn:
// one candle per candle of the answer, a body for each with trades (green
// when the close is not below the open), the best bid and ask as lines
// skipping the candle before the first price, a label naming the market,
// the interval and the count; an empty range says so; another route's
// answer hides the chart; the key is nowhere in the page. The chart's
// picture is saved under the artifacts folder (docs-candles-chart.png).
func TestCandlesChartInBrowser(t *testing.T) {
	ctx := browsertest.Start(t) // skips (or fails in CI) without Chromium
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + ln.Addr().String()
	svc := servicetest.Start(t, servicetest.Options{Env: map[string]string{"MD_DOCS_ORIGIN": origin}})
	market, from, to := feedCandles(t, svc)
	key := svc.NewKey("markets:read")
	path := "/public/v1/markets/" + market + "/candles?interval=1m&from=" + from.Format(time.RFC3339) + "&to=" + to.Format(time.RFC3339)
	var want []candle
	svc.Await("the 12 candles with 30 trades served", func() (bool, string) {
		code, list, err := getCandles(t, svc.URL(), key.Secret, path)
		trades, bids := 0, 0
		for _, c := range list {
			trades += c.Trades
			if c.Bid != nil && c.Bid.Close != nil {
				bids++
			}
		}
		want = list
		return err == nil && len(list) == 12 && trades == 30 && bids == 11,
			fmt.Sprintf("status %d, %d candles, %d trades, %d with a bid (%v)", code, len(list), trades, bids, err)
	})

	s, err := New(Config{Spec: docs.OpenAPIYAML, APIURLs: []string{svc.URL()}, DocsOrigin: origin})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with Close
	t.Cleanup(func() { _ = srv.Close() })

	browsertest.Step(t, ctx, "load the site from "+origin,
		chromedp.EmulateViewport(1440, 1000, chromedp.EmulateScale(2)), // a sharp picture of the chart
		chromedp.Navigate(origin+"/"),
		chromedp.WaitVisible(chromedp.ID("tryit-ui")),
		// The chart must stay within the page's CSP (no inline style).
		browsertest.EvalVoid(`window.violations = []; document.addEventListener("securitypolicyviolation",
			e => window.violations.push(e.violatedDirective + " " + e.blockedURI))`),
		chromedp.SendKeys(chromedp.ID("tryit-api-key"), key.Secret),
	)
	if st := sendCandles(t, ctx, market, "1m", from, to); st != "200" {
		t.Fatalf("panel status %q, want 200", st)
	}
	browsertest.Step(t, ctx, "wait for the chart", chromedp.WaitVisible(chromedp.CSS(`#tryit-chart[data-candles] svg`)))
	got := readDrawn(t, ctx)
	var wantStarts, wantBodies []string
	for _, c := range want {
		wantStarts = append(wantStarts, c.Start)
		if c.Trade != nil {
			wantBodies = append(wantBodies, map[bool]string{true: "body up", false: "body down"}[c.Trade.Close >= c.Trade.Open])
		}
	}
	if got.Candles != "12" || strings.Join(got.Groups, " ") != strings.Join(wantStarts, " ") {
		t.Errorf("chart: data-candles %q, candles %q; want 12, %q", got.Candles, got.Groups, wantStarts)
	}
	if got.TradeCandles != strconv.Itoa(len(wantBodies)) || strings.Join(got.Bodies, ",") != strings.Join(wantBodies, ",") || len(wantBodies) != 10 {
		t.Errorf("trade bodies %q (data-trade-candles %q), want %q (10)", got.Bodies, got.TradeCandles, wantBodies)
	}
	if got.BidSteps != 11 || got.AskSteps != 11 {
		t.Errorf("bid and ask lines over %d and %d candles, want 11 each (none before the first price)", got.BidSteps, got.AskSteps)
	}
	wantLabel := "12 candles of " + market + ", interval 1m, all venues"
	if got.Label != wantLabel || got.Caption != wantLabel {
		t.Errorf("chart label %q, caption %q; want %q", got.Label, got.Caption, wantLabel)
	}
	browsertest.Step(t, ctx, "scroll to the chart", chromedp.ScrollIntoView(chromedp.ID("tryit-chart")))
	browsertest.Screenshot(t, ctx, "docs-candles-chart-panel.png")
	saveElement(t, ctx, "#tryit-chart", "docs-candles-chart.png")

	// A range with no data: no drawing, a short text.
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if st := sendCandles(t, ctx, market, "1m", past, past.Add(time.Hour)); st != "200" {
		t.Fatalf("panel status %q for an empty range, want 200", st)
	}
	browsertest.Step(t, ctx, "wait for the empty chart", chromedp.WaitVisible(chromedp.CSS(`#tryit-chart[data-candles="0"] .chart-empty`)))
	if empty := readDrawn(t, ctx); empty.Empty != "No candles in this range." || len(empty.Groups) != 0 ||
		empty.Caption != "0 candles of "+market+", interval 1m, all venues" {
		t.Errorf("empty range: %+v", empty)
	}

	// Another route's answer takes the chart away.
	browsertest.Step(t, ctx, "send /key",
		chromedp.SetValue(chromedp.ID("tryit-route"), "getKey"),
		browsertest.EvalVoid(`document.getElementById("tryit-route").dispatchEvent(new Event("change"))`),
		browsertest.EvalVoid(`document.getElementById("tryit-status").removeAttribute("data-status")`),
		chromedp.Click(chromedp.ID("tryit-send")),
		chromedp.WaitVisible(chromedp.CSS(`#tryit-status[data-status="200"]`)),
	)
	if after := readDrawn(t, ctx); !after.Hidden || after.Candles != "" {
		t.Errorf("after /key the chart shows %+v, want it hidden and empty", after)
	}
	if v := browsertest.Eval[[]string](t, ctx, `window.violations`); len(v) > 0 {
		t.Errorf("the page broke its CSP: %q", v)
	}
	if html := browsertest.Eval[string](t, ctx, `document.documentElement.outerHTML`); strings.Contains(html, key.Secret) || strings.Contains(html, key.Secret[9:]) {
		t.Error("the key is in the page's markup")
	}
}

// saveElement saves a picture of the element as it is on screen (cut out
// of the window's screenshot: the panel scrolls inside a sticky box, which
// an element screenshot of the page does not follow) under the artifacts
// folder.
func saveElement(t *testing.T, ctx context.Context, sel, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browsertest.Timeout)
	defer cancel()
	shot, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot of %s: %v", sel, err)
	}
	var box struct{ X, Y, W, H, Scale float64 }
	rect := `(() => { const r = document.querySelector(` + strconv.Quote(sel) + `).getBoundingClientRect();
		return JSON.stringify({X: r.left, Y: r.top, W: r.width, H: r.height, Scale: window.devicePixelRatio}); })()`
	if err := json.Unmarshal([]byte(browsertest.Eval[string](t, ctx, rect)), &box); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	px := func(v float64) int { return int(v * box.Scale) }
	cut := image.Rect(px(box.X), px(box.Y), px(box.X+box.W), px(box.Y+box.H)).Inset(-px(4)).Intersect(img.Bounds())
	sub, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok || cut.Dx() < 100 || cut.Dy() < 100 {
		t.Fatalf("cannot cut %s (%v) out of the %v screenshot", sel, cut, img.Bounds())
	}
	var out bytes.Buffer
	if err := png.Encode(&out, sub.SubImage(cut)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(browsertest.ArtifactsDir(t), name)
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

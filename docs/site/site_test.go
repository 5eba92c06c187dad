package site

import (
	"bytes"
	"compress/gzip"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/marketdata/marketdata/docs"
)

func newSite(t *testing.T, urls ...string) *Site {
	t.Helper()
	if len(urls) == 0 {
		urls = []string{"http://127.0.0.1:8080"}
	}
	s, err := New(Config{Spec: docs.OpenAPIYAML, APIURLs: urls, DocsOrigin: "http://127.0.0.1:8081"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func get(t *testing.T, s http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// rawDoc is openapi.yaml read independently of the site's own model, with
// parameter references followed: what the page must show.
type rawDoc struct {
	Paths map[string]struct {
		Get struct {
			OperationID string `yaml:"operationId"`
			Summary     string `yaml:"summary"`
			Parameters  []rawParam
			Responses   map[string]any
		}
	}
	Components struct {
		Parameters map[string]rawParam
		Schemas    map[string]rawSchema
	}
}

type rawParam struct {
	Ref    string `yaml:"$ref"`
	Name   string
	In     string
	Schema rawSchema
}

type rawSchema struct {
	Ref     string   `yaml:"$ref"`
	Minimum *float64 `yaml:"minimum"`
	Maximum *float64 `yaml:"maximum"`
	Enum    []string `yaml:"enum"`
	Pattern string   `yaml:"pattern"`
	MaxLen  *int     `yaml:"maxLength"`
}

func loadRaw(t *testing.T) rawDoc {
	t.Helper()
	var d rawDoc
	if err := yaml.Unmarshal(docs.OpenAPIYAML, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// section returns the HTML of the reference article of operation id.
func section(t *testing.T, page, id string) string {
	t.Helper()
	start := strings.Index(page, `<article class="op" id="op-`+id+`">`)
	if start < 0 {
		t.Fatalf("no reference section for %s", id)
	}
	end := strings.Index(page[start:], "</article>")
	return page[start : start+end]
}

// TestEveryRouteInReference: each route of openapi.yaml has its section
// with its path, every parameter with its limits (range, enum, pattern,
// length), every response status, and a form in the try-it panel.
func TestEveryRouteInReference(t *testing.T) {
	d := loadRaw(t)
	if len(d.Paths) < 10 {
		t.Fatalf("openapi.yaml has %d paths; the contract lists 10", len(d.Paths))
	}
	_, page := get(t, newSite(t), http.MethodGet, "/")
	for path, item := range d.Paths {
		op := item.Get
		t.Run(op.OperationID, func(t *testing.T) {
			sec := section(t, page, op.OperationID)
			if !strings.Contains(sec, `<code class="path">`+path+`</code>`) {
				t.Errorf("section does not show the path %s", path)
			}
			if !strings.Contains(sec, html.EscapeString(op.Summary)) {
				t.Errorf("section does not show the summary %q", op.Summary)
			}
			for status := range op.Responses {
				if !strings.Contains(sec, `<tr data-status="`+status+`">`) {
					t.Errorf("response %s not listed", status)
				}
			}
			for _, p := range op.Parameters {
				if p.Ref != "" {
					p = d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				}
				s := p.Schema
				if s.Ref != "" {
					s = d.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
				}
				row := regexp.MustCompile(`(?s)<tr data-param="` + regexp.QuoteMeta(p.Name) + `">.*?</tr>`).FindString(sec)
				if row == "" {
					t.Errorf("parameter %s not in the table", p.Name)
					continue
				}
				var want []string
				switch {
				case s.Minimum != nil && s.Maximum != nil:
					want = append(want, num(*s.Minimum)+"–"+num(*s.Maximum))
				case s.Maximum != nil:
					want = append(want, "≤ "+num(*s.Maximum))
				}
				for _, e := range s.Enum {
					want = append(want, "<code>"+html.EscapeString(e)+"</code>")
				}
				if s.Pattern != "" {
					want = append(want, html.EscapeString(s.Pattern))
				}
				if s.MaxLen != nil {
					want = append(want, itoa(*s.MaxLen)+" characters")
				}
				for _, w := range want {
					if !strings.Contains(row, w) {
						t.Errorf("parameter %s: row lacks %q:\n%s", p.Name, w, row)
					}
				}
				field := regexp.MustCompile(`(?s)<fieldset class="form" data-op="` + op.OperationID + `".*?</fieldset>`).FindString(page)
				if p.In == "header" {
					// The API's CORS lets a page send Authorization only.
					if !strings.Contains(field, `data-header-param="`+p.Name+`"`) || strings.Contains(field, `data-param="`+p.Name+`"`) {
						t.Errorf("header %s: want the note, and no field the page could not send", p.Name)
					}
					continue
				}
				if !strings.Contains(field, `data-param="`+p.Name+`" data-in="`+p.In+`"`) {
					t.Errorf("parameter %s has no field in the try-it form", p.Name)
				}
				if s.Minimum != nil && !strings.Contains(field, `min="`+num(*s.Minimum)+`"`) {
					t.Errorf("parameter %s: field lacks min=%v", p.Name, *s.Minimum)
				}
				if s.Maximum != nil && !strings.Contains(field, `max="`+num(*s.Maximum)+`"`) {
					t.Errorf("parameter %s: field lacks max=%v", p.Name, *s.Maximum)
				}
				for _, e := range s.Enum {
					if !strings.Contains(field, `<option value="`+e+`">`) {
						t.Errorf("parameter %s: field lacks option %s", p.Name, e)
					}
				}
			}
			if !strings.Contains(page, `<option value="`+op.OperationID+`">GET `) {
				t.Errorf("route picker lacks %s", op.OperationID)
			}
		})
	}
}

func itoa(n int) string { return num(float64(n)) }

// TestReferenceContent: concepts, schemas, examples and the error table of
// the document are on the page, and the stream route offers no send.
func TestReferenceContent(t *testing.T) {
	_, page := get(t, newSite(t), http.MethodGet, "/")
	for _, want := range []string{
		`<h2 id="authentication-and-scopes">Authentication and scopes</h2>`,
		`<h2 id="paging">Paging</h2>`,
		`<h2 id="conditional-reads">Conditional reads</h2>`,
		`<td><code>origin_not_allowed</code></td>`, // the error table, rendered as a table
		`<article class="schema" id="schema-EventSummary">`,
		`<a href="#schema-EventPage">EventPage</a>`,
		`&#34;universal_id&#34;: &#34;ev-fed-rate-2025-06&#34;`, // an example, in document order
		`<td>4401</td><td>the key was revoked or expired</td>`,  // the stream's close codes
		`<td><a href="#schema-Error">Error</a></td></tr>`,       // an error answer's body
		`id="tryit-api-key" type="password" autocomplete="off"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	stream := regexp.MustCompile(`(?s)<fieldset class="form" data-op="openStream"[^>]*>`).FindString(page)
	if !strings.Contains(stream, "data-websocket") {
		t.Errorf("stream form not marked as WebSocket: %s", stream)
	}
	// The key field is never submitted: no name, and no form element to submit it.
	if regexp.MustCompile(`<input id="tryit-api-key"[^>]*name=`).MatchString(page) || strings.Contains(page, "<form") {
		t.Error("the key field has a name or the page has a form")
	}
	// No text of the document becomes markup: no script or style but ours.
	if n, ours := strings.Count(page, "<script"), strings.Count(page, `<script src="/static/`); n != 2 || ours != n {
		t.Errorf("%d script elements, %d of them ours; want the two first-party files (app.js, chart.js)", n, ours)
	}
	if strings.Contains(page, "style=") || strings.Contains(page, "<style") {
		t.Error("inline style: the CSP (style-src 'self') would block it")
	}
}

// TestSecurityHeaders: every answer carries the CSP and the other headers.
func TestSecurityHeaders(t *testing.T) {
	s := newSite(t, "https://api.example.com/", "http://127.0.0.1:8080")
	for _, path := range []string{"/", "/static/app.js", "/static/chart.js", "/static/site.css", "/openapi.yaml", "/healthz", "/nope"} {
		res, _ := get(t, s, http.MethodGet, path)
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{
			"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
			"connect-src https://api.example.com http://127.0.0.1:8080;",
			"frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'",
		} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		for h, want := range map[string]string{"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"} {
			if got := res.Header.Get(h); got != want {
				t.Errorf("%s: %s = %q, want %q", path, h, got, want)
			}
		}
	}
}

func TestRoutes(t *testing.T) {
	s := newSite(t)
	for _, c := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/", 200, "text/html; charset=utf-8"},
		{"GET", "/static/app.js", 200, "text/javascript; charset=utf-8"}, {"GET", "/static/chart.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/static/site.css", 200, "text/css; charset=utf-8"},
		{"GET", "/openapi.yaml", 200, "application/yaml; charset=utf-8"},
		{"GET", "/healthz", 200, "text/plain; charset=utf-8"},
		{"GET", "/nope", 404, "text/plain; charset=utf-8"},
		{"GET", "/static/", 404, "text/plain; charset=utf-8"},
		{"GET", "/static/../site.go", 404, "text/plain; charset=utf-8"},
		{"POST", "/", 405, "text/plain; charset=utf-8"},
	} {
		res, body := get(t, s, c.method, c.path)
		if res.StatusCode != c.status || res.Header.Get("Content-Type") != c.ctype {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, res.StatusCode, res.Header.Get("Content-Type"), c.status, c.ctype)
		}
		if c.status == 404 && !strings.Contains(body, "not found") {
			t.Errorf("%s: 404 body %q", c.path, body)
		}
	}
	res, body := get(t, s, "GET", "/openapi.yaml")
	if body != string(docs.OpenAPIYAML) {
		t.Error("/openapi.yaml is not the embedded document")
	}
	// Revalidation: the ETag answers 304.
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("If-None-Match", res.Header.Get("ETag"))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		// The page's tag differs from the document's: a 200 is right here.
		t.Logf("page with the document's tag: %d", rec.Code)
	}
	page, _ := get(t, s, "GET", "/")
	req = httptest.NewRequest("GET", "/", nil)
	req.Header.Set("If-None-Match", page.Header.Get("ETag"))
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match with the page's ETag: %d, want 304", rec.Code)
	}
}

// TestGzip: a client that takes gzip gets the same bytes compressed, under
// a tag of their own; one that refuses it (q=0) gets them plain.
func TestGzip(t *testing.T) {
	s := newSite(t)
	_, plainPage := get(t, s, "GET", "/")
	for _, c := range []struct {
		accept string
		gz     bool
	}{{"gzip, deflate, br", true}, {"br;q=1, GZIP;q=0.5", true}, {"gzip;q=0", false}, {"", false}, {"deflate", false}} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Accept-Encoding", c.accept)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		res := rec.Result()
		body := rec.Body.Bytes()
		if got := res.Header.Get("Content-Encoding") == "gzip"; got != c.gz {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", c.accept, got, c.gz)
			continue
		}
		if !strings.Contains(res.Header.Get("Vary"), "Accept-Encoding") {
			t.Errorf("Accept-Encoding %q: no Vary: Accept-Encoding", c.accept)
		}
		if c.gz {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(res.Header.Get("ETag"), `-gz"`) {
				t.Errorf("gzip answer's ETag %q is the plain one's", res.Header.Get("ETag"))
			}
		}
		if string(body) != plainPage {
			t.Errorf("Accept-Encoding %q: the page differs", c.accept)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"no spec", Config{APIURLs: []string{"http://a"}}},
		{"no api", Config{Spec: docs.OpenAPIYAML}},
		{"ftp", Config{Spec: docs.OpenAPIYAML, APIURLs: []string{"ftp://a"}}},
		{"query", Config{Spec: docs.OpenAPIYAML, APIURLs: []string{"http://a/?x=1"}}},
		{"user", Config{Spec: docs.OpenAPIYAML, APIURLs: []string{"http://u:p@a"}}},
		{"csp injection", Config{Spec: docs.OpenAPIYAML, APIURLs: []string{"http://a;script-src"}}},
		{"bad yaml", Config{Spec: []byte("paths: ["), APIURLs: []string{"http://a"}}},
		{"dangling ref", Config{Spec: []byte("paths:\n  /x:\n    get:\n      operationId: x\n      parameters:\n        - $ref: '#/components/parameters/Nope'\n"), APIURLs: []string{"http://a"}}},
		// JSON holds no infinity: an example with one cannot be shown.
		{"schema example", Config{Spec: []byte("components:\n  schemas:\n    X:\n      examples: [{a: .inf}]\n"), APIURLs: []string{"http://a"}}},
		{"response example", Config{Spec: []byte("paths:\n  /x:\n    get:\n      operationId: x\n      responses:\n        '200':\n          content:\n            application/json:\n              schema: {type: object}\n              examples: {e: {value: .inf}}\n"), APIURLs: []string{"http://a"}}},
		{"referenced schema's example", Config{Spec: []byte("paths:\n  /x:\n    get:\n      operationId: x\n      responses:\n        '200':\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/X'}\ncomponents:\n  schemas:\n    X:\n      examples: [.nan]\n"), APIURLs: []string{"http://a"}}},
	} {
		if _, err := New(c.cfg); err == nil {
			t.Errorf("%s: New accepted it", c.name)
		}
	}
}

// TestIDsUnique: every id on the page is unique (headings of the document
// get ids from their text, in the same id space as the panel's, which are
// prefixed tryit-), every label, datalist and description the markup
// points at exists, and every element the script looks up by id is there.
func TestIDsUnique(t *testing.T) {
	_, page := get(t, newSite(t), http.MethodGet, "/")
	ids := map[string]int{}
	for _, m := range regexp.MustCompile(`\sid="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		ids[m[1]]++
	}
	if len(ids) < 50 {
		t.Fatalf("only %d ids on the page: the pattern finds none of them?", len(ids))
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("id %q appears %d times", id, n)
		}
		if id == "" {
			t.Error("an empty id")
		}
	}
	refs := regexp.MustCompile(`\s(?:for|list|aria-describedby)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(refs) == 0 {
		t.Fatal("no for/list/aria-describedby on the page")
	}
	for _, m := range refs {
		if ids[m[1]] == 0 {
			t.Errorf("the markup points at id %q, which is not on the page", m[1])
		}
	}
	for _, href := range regexp.MustCompile(`\shref="#([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if ids[href[1]] == 0 {
			t.Errorf("link to #%s, which is not on the page", href[1])
		}
	}
	_, js := get(t, newSite(t), http.MethodGet, "/static/app.js")
	looked := regexp.MustCompile(`\$\("([^"]+)"\)`).FindAllStringSubmatch(js, -1)
	if len(looked) < 10 {
		t.Fatalf("app.js looks up %d ids by $(...): the pattern is stale", len(looked))
	}
	for _, m := range looked {
		if !strings.HasPrefix(m[1], "tryit") {
			t.Errorf("app.js looks up id %q, outside the panel's tryit- prefix", m[1])
		}
		if ids[m[1]] == 0 {
			t.Errorf("app.js looks up id %q, which is not on the page", m[1])
		}
	}
}

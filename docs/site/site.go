// Package site is the documentation site of the public API: a reference of
// every route rendered on the server from the OpenAPI document (readable
// without JavaScript), the concepts a user needs, and a try-it panel (one
// first-party script) that sends a request with a pasted key to an API
// node and shows the status, the RateLimit-* headers and the body, and
// draws a candles answer as a chart (a second first-party script).
//
// The page holds a user's live key, so it ships no third-party code and
// its Content-Security-Policy lets it talk to the listed API origins only;
// docs/site.md says why the site is ours rather than a bundled renderer.
package site

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

//go:embed templates/index.html.tmpl
var templates embed.FS

//go:embed assets
var assets embed.FS

// Config is what the site needs.
type Config struct {
	// Spec is the OpenAPI document (YAML) the reference is made from:
	// docs.OpenAPIYAML.
	Spec []byte
	// APIURLs are the base URLs (scheme://host[:port][/prefix]) the try-it
	// panel may call: the first fills the panel's field, the others are
	// offered, and the page's CSP lets it connect to their origins only.
	APIURLs []string
	// DocsOrigin is the origin the site is served at (MD_DOCS_ORIGIN), the
	// one the API lets browsers call it from; a page opened from another
	// origin says that its calls will be refused.
	DocsOrigin string
}

// ShownHeaders are the answer headers the try-it panel shows, in order;
// the API exposes each of them to browsers (Access-Control-Expose-Headers).
var ShownHeaders = []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "X-Request-Id", "ETag"}

// Site serves the documentation site.
type Site struct {
	index  asset
	spec   asset
	assets map[string]asset
	csp    string
}

// asset is one file the site serves, with its gzip form.
type asset struct {
	body, gz    []byte
	contentType string
	etag        string
}

func newAsset(body []byte, contentType string) asset {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level: no error
	_, _ = zw.Write(body)                                    // writes to memory do not fail
	_ = zw.Close()
	return asset{body: body, gz: buf.Bytes(), contentType: contentType, etag: etag(body)}
}

// New renders the page once from cfg.Spec and returns the site. It fails
// when the document or an API URL cannot be used.
func New(cfg Config) (*Site, error) {
	if len(cfg.Spec) == 0 {
		return nil, fmt.Errorf("site: Config.Spec is empty")
	}
	if len(cfg.APIURLs) == 0 {
		return nil, fmt.Errorf("site: Config.APIURLs is empty: the try-it panel needs an API to call")
	}
	var origins []string
	for _, u := range cfg.APIURLs {
		o, err := APIOrigin(u)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
	}
	d, err := parseDocument(cfg.Spec)
	if err != nil {
		return nil, err
	}
	v, err := buildView(d)
	if err != nil {
		return nil, err
	}
	s := &Site{spec: newAsset(cfg.Spec, "application/yaml; charset=utf-8"), assets: map[string]asset{}}
	for name, ct := range map[string]string{"app.js": "text/javascript; charset=utf-8", "chart.js": "text/javascript; charset=utf-8",
		"site.css": "text/css; charset=utf-8"} {
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			return nil, fmt.Errorf("site: %w", err)
		}
		s.assets["/static/"+name] = newAsset(b, ct)
	}
	streamID := ""
	for _, g := range v.Groups {
		for _, op := range g.Ops {
			if op.WebSocket {
				streamID = op.ID
			}
		}
	}
	v.APIURLs, v.DocsOrigin = cfg.APIURLs, cfg.DocsOrigin
	tmpl, err := template.New("index.html.tmpl").Funcs(template.FuncMap{
		"trimPrefix": func(p string) string { return strings.TrimPrefix(p, "/public/v1") },
	}).ParseFS(templates, "templates/index.html.tmpl")
	if err != nil {
		return nil, fmt.Errorf("site: %w", err)
	}
	var buf bytes.Buffer
	err = tmpl.Execute(&buf, struct {
		*pageView
		AssetVersion string
		StreamID     string
		ShownHeaders []string
	}{v, s.assets["/static/app.js"].etag[1:9] + s.assets["/static/chart.js"].etag[1:9] + s.assets["/static/site.css"].etag[1:9],
		streamID, ShownHeaders})
	if err != nil {
		return nil, fmt.Errorf("site: render: %w", err)
	}
	s.index = newAsset(buf.Bytes(), "text/html; charset=utf-8")
	s.csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src " + strings.Join(origins, " ") + "; " +
		"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
	return s, nil
}

// APIOrigin checks an API base URL (http or https, a host, no query,
// fragment or user info) and returns its origin.
func APIOrigin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(u.Host, " '\";") {
		return "", fmt.Errorf("site: %q is not an API base URL like https://api.example.com", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

func etag(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

// ServeHTTP serves the page, its three assets, the OpenAPI document and
// /healthz; anything else is 404. Only GET and HEAD are answered.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", s.csp)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		plain(w, http.StatusMethodNotAllowed, "method not allowed: the documentation site answers GET and HEAD")
		return
	}
	switch r.URL.Path {
	case "/", "/index.html":
		serve(w, r, s.index)
	case "/openapi.yaml":
		h.Set("Access-Control-Allow-Origin", "*") // a public document: tools may fetch it
		h.Set("Cross-Origin-Resource-Policy", "cross-origin")
		serve(w, r, s.spec)
	case "/healthz":
		h.Set("Cache-Control", "no-store")
		plain(w, http.StatusOK, "ok")
	default:
		a, ok := s.assets[r.URL.Path]
		if !ok {
			plain(w, http.StatusNotFound, "not found: "+notFoundHint)
			return
		}
		serve(w, r, a)
	}
}

const notFoundHint = "the documentation is at /"

// serve answers with a (gzipped when the client takes gzip) and its ETag;
// browsers revalidate on every load (no-cache), so a new binary's page is
// seen at once.
func serve(w http.ResponseWriter, r *http.Request, a asset) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Add("Vary", "Accept-Encoding")
	body, tag := a.body, a.etag
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body, tag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", tag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether an Accept-Encoding value takes gzip (not
// refused with q=0).
func acceptsGzip(v string) bool {
	for part := range strings.SplitSeq(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n")) // a client gone is not an error of the site
}

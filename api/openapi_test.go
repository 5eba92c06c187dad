package api_test

import (
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/docs"
	"github.com/marketdata/marketdata/ratelimit"
	"github.com/marketdata/marketdata/store"
)

// TestOpenAPIMatchesRouter holds the OpenAPI document against the real
// router: every GET route the node serves under /public/v1 is documented,
// and every documented path is served, except those marked
// x-availability: planned (none now: every route is served).
func TestOpenAPIMatchesRouter(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(docs.OpenAPIYAML, &doc); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: routes only
	defer rdb.Close()
	reader, err := cache.NewReader(cache.New(rdb, "x:", cache.Rules{Retention: time.Hour, Now: time.Now}),
		store.New(nil), readerConfig(), cache.ReaderDeps{}) // never read: routes only
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	slots, err := ratelimit.NewStreams(rdb, ratelimit.StreamsConfig{Limit: 10, Lease: time.Minute, Timeout: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ac := api.DefaultConfig()
	ac.DocsOrigin = "http://docs.example"
	srv, err := api.New(ac, api.Deps{
		Credentials: store.New(nil), // never read: it lists keys, so /account/keys is served
		Usage:       store.New(nil), // never read: /account/usage is served
		Candles:     store.New(nil), // never read: the candles route is served
		Reader:      reader, StreamSlots: slots,
		Limiter: mustLimiter(t, rdb, ratelimit.Config{Limit: 1, Window: time.Second, AuthFailLimit: 1, AuthFailWindow: time.Second,
			Timeout: 50 * time.Millisecond}),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`:([a-z_]+)`)
	var served []string
	for _, r := range srv.App().GetRoutes(true) {
		if r.Method != "GET" || !strings.HasPrefix(r.Path, "/public/v1/") {
			continue
		}
		p := param.ReplaceAllString(r.Path, "{$1}")
		if !slices.Contains(served, p) {
			served = append(served, p)
		}
	}
	if len(served) < 7 {
		t.Fatalf("served routes: got %v, want the key, openapi and five data routes", served)
	}
	for _, p := range served {
		ops, ok := doc.Paths[p]
		if !ok {
			t.Errorf("served route %s is not in docs/openapi.yaml", p)
			continue
		}
		if _, ok := ops["get"]; !ok {
			t.Errorf("served route %s: the document has no get operation", p)
		}
		if ops["x-availability"] == "planned" {
			t.Errorf("served route %s is marked planned in the document", p)
		}
	}
	for p, ops := range doc.Paths {
		if ops["x-availability"] == "planned" {
			continue
		}
		if !slices.Contains(served, p) {
			t.Errorf("documented path %s is not served by the router", p)
		}
	}
}

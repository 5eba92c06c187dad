package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRunDocs: `marketdata docs` serves the site and /healthz on its
// address, the panel set to the configured API URL, and stops when its
// context ends.
func TestRunDocs(t *testing.T) {
	cfg, err := LoadConfig(envOf(map[string]string{
		"MD_DOCS_ADDR": "127.0.0.1:0", "MD_DOCS_API_URL": "https://api.example.com",
	}), secretsUnused)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- runDocs(ctx, cfg, slog.New(slog.DiscardHandler), func(a string) { ready <- a }) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("docs exited at start: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("docs not listening within 10 s")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/":        `<input id="tryit-api-url" type="url" value="https://api.example.com"`,
	} {
		res, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, res.StatusCode, want)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src https://api.example.com;") {
			t.Errorf("GET %s: CSP %q does not allow the API origin alone", path, csp)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("docs stopped with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("docs did not stop within 15 s of its context's end")
	}
	if _, err := client.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("docs still answers after stopping")
	}
}

// TestDocsCommandRefuses: a bad --api-url or MD_DOCS_ADDR stops the command
// before it listens, naming the culprit.
func TestDocsCommandRefuses(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"docs", "--api-url", "ftp://x"}, "--api-url: "},
		{map[string]string{"MD_DOCS_ADDR": "nope"}, []string{"docs"}, "MD_DOCS_ADDR: "},
		{map[string]string{"MD_DOCS_ADDR": "203.0.113.1:1"}, []string{"docs"}, "MD_DOCS_ADDR: cannot listen"},
	} {
		var out, errOut strings.Builder
		root := newRoot(envOf(c.env), &out, &errOut)
		root.SetArgs(c.args)
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v %v: got %v, want an error starting with %q", c.env, c.args, err, c.want)
		}
	}
}

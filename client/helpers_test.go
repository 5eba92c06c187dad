package client_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/marketdata/marketdata/client"
	"github.com/marketdata/marketdata/internal/servicetest"
)

// recorder is a transport that remembers the status of every answer (0 for
// a request that got none) and the paths asked.
type recorder struct {
	rt       http.RoundTripper
	mu       sync.Mutex
	statuses []int
	paths    []string
	queries  []string // the raw query of each request
	inm      []string // If-None-Match of each request
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paths = append(r.paths, req.URL.Path)
	r.queries = append(r.queries, req.URL.RawQuery)
	r.inm = append(r.inm, req.Header.Get("If-None-Match"))
	if err != nil {
		r.statuses = append(r.statuses, 0)
	} else {
		r.statuses = append(r.statuses, resp.StatusCode)
	}
	return resp, err
}

// Statuses returns the statuses so far and forgets them.
func (r *recorder) take() (statuses []int, inm []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	statuses, inm = r.statuses, r.inm
	r.statuses, r.paths, r.queries, r.inm = nil, nil, nil, nil
	return statuses, inm
}

// takeQueries returns the raw queries sent so far and forgets every
// request.
func (r *recorder) takeQueries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queries
	r.statuses, r.paths, r.queries, r.inm = nil, nil, nil, nil
	return q
}

// newClient returns a client of baseURL with secret whose answers r
// records; opts come after the test's defaults (short backoff).
func newClient(t *testing.T, baseURL, secret string, opts ...client.Option) (*client.Client, *recorder) {
	t.Helper()
	r := &recorder{rt: &http.Transport{}}
	all := append([]client.Option{
		client.WithBaseURL(baseURL),
		client.WithHTTPClient(&http.Client{Transport: r, Timeout: 30 * time.Second}),
		client.WithBackoff(10*time.Millisecond, 100*time.Millisecond),
	}, opts...)
	c, err := client.New(secret, all...)
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}

// ctxT is a context that ends with the test, with a generous bound.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startService starts a service of one API node with opts.Env.
func startService(t *testing.T, env map[string]string) *servicetest.Service {
	t.Helper()
	return servicetest.Start(t, servicetest.Options{Env: env})
}

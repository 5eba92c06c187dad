package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// scripted is a server that answers each request with the next step of its
// script (status, headers, body) and remembers what it was asked. It stands
// in for the service where the service cannot be made to answer so: a 429
// without Retry-After, a Retry-After as an HTTP date, a proxy's page.
type scripted struct {
	*httptest.Server
	mu    sync.Mutex
	steps []step
	uris  []string
	auth  []string
	ua    []string
}

type step struct {
	status int
	header map[string]string
	body   string
}

func newScripted(t *testing.T, steps ...step) *scripted {
	t.Helper()
	s := &scripted{steps: steps}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.uris = append(s.uris, r.RequestURI)
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.ua = append(s.ua, r.Header.Get("User-Agent"))
		st := step{status: 500, body: "script exhausted"}
		if len(s.steps) > 0 {
			st, s.steps = s.steps[0], s.steps[1:]
		}
		s.mu.Unlock()
		for k, v := range st.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(st.status)
		w.Write([]byte(st.body)) //nolint:errcheck // the client's side is what the test checks
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scripted) asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.uris)
}

func scriptedClient(t *testing.T, s *scripted, opts ...Option) *Client {
	t.Helper()
	c, err := New("mdk_live_secret", append([]Option{WithBaseURL(s.URL + "/prefix/"), WithBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const keyJSON = `{"key_id":"k1","last4":"cret","account_id":"a1","scopes":[],"ip_allowlist":[],"created_at":"2026-11-24T09:00:00Z","expires_at":"2027-02-22T09:00:00Z","limit":10,"window_s":60}`

// TestRequestShape: the base URL's path prefix, the id, the Authorization
// and User-Agent headers.
func TestRequestShape(t *testing.T) {
	s := newScripted(t, step{status: 404, body: `{"error":{"code":"not_found","message":"no such event"}}`})
	c := scriptedClient(t, s, WithUserAgent("watcher/1.0"))
	_, err := c.Event(context.Background(), "Ev_1-x")
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("got %v, want the 404", err)
	}
	if got := s.asked(); !slices.Equal(got, []string{"/prefix/public/v1/events/Ev_1-x"}) {
		t.Fatalf("request URI: got %v", got)
	}
	if s.auth[0] != "Bearer mdk_live_secret" || s.ua[0] != "watcher/1.0" {
		t.Fatalf("headers: got Authorization %q, User-Agent %q", s.auth[0], s.ua[0])
	}
}

// TestRetryScript: the retry policy on answers the service does not give
// on cue.
func TestRetryScript(t *testing.T) {
	ok := step{status: 200, body: keyJSON, header: map[string]string{
		"RateLimit-Limit": "10", "RateLimit-Remaining": "7", "RateLimit-Reset": "12"}}
	cases := []struct {
		name     string
		opts     []Option
		steps    []step
		wantErr  int // status of the *Error returned, 0 for success
		requests int
	}{
		{"429 without Retry-After: backoff", nil,
			[]step{{status: 429, body: `{"error":{"code":"rate_limited","message":"x"}}`}, ok}, 0, 2},
		{"429 with an HTTP date", nil,
			[]step{{status: 429, header: map[string]string{"Retry-After": time.Now().Add(time.Second).UTC().Format(http.TimeFormat)}}, ok}, 0, 2},
		{"429 over the cap", []Option{WithMaxRetryAfter(time.Second)},
			[]step{{status: 429, header: map[string]string{"Retry-After": "2"}}, ok}, 429, 1},
		{"503 proxy page, then success", nil,
			[]step{{status: 503, body: "<html>down</html>"}, {status: 503}, ok}, 0, 3},
		{"502 from a load balancer, then success", nil, []step{{status: 502, body: "<html>bad gateway</html>"}, ok}, 0, 2},
		{"504 from a load balancer, then success", nil, []step{{status: 504}, ok}, 0, 2},
		{"502 and 504 until the retries run out", []Option{WithMaxRetries(2)}, []step{{status: 502}, {status: 504}, {status: 502}, ok}, 502, 3},
		{"500 is not retried", nil, []step{{status: 500}, ok}, 500, 1},
		{"501 is not retried", nil, []step{{status: 501}, ok}, 501, 1},
		{"400 is not retried", nil, []step{{status: 400}, ok}, 400, 1},
		{"409 is not retried", nil, []step{{status: 409}, ok}, 409, 1},
		{"retries off", []Option{WithMaxRetries(0)}, []step{{status: 503}, ok}, 503, 1},
		{"retries run out", []Option{WithMaxRetries(2)}, []step{{status: 503}, {status: 503}, {status: 503}, ok}, 503, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t, tc.steps...)
			c := scriptedClient(t, s, tc.opts...)
			k, err := c.Key(context.Background())
			if n := len(s.asked()); n != tc.requests {
				t.Errorf("requests: got %d, want %d", n, tc.requests)
			}
			if tc.wantErr == 0 {
				if err != nil || k.KeyID != "k1" {
					t.Fatalf("got %+v %v, want the key", k, err)
				}
				rl, ok := c.RateLimit()
				if !ok || rl.Limit != 10 || rl.Remaining != 7 || rl.Reset != 12*time.Second {
					t.Fatalf("RateLimit: got %+v %v", rl, ok)
				}
				return
			}
			var apiErr *Error
			if !errors.As(err, &apiErr) || apiErr.Status != tc.wantErr {
				t.Fatalf("got %v, want a %d *Error", err, tc.wantErr)
			}
		})
	}
}

// TestNotModifiedWithoutTag: a 304 the client did not ask for is an error,
// not an empty success.
func TestNotModifiedWithoutTag(t *testing.T) {
	s := newScripted(t, step{status: 304})
	c := scriptedClient(t, s)
	_, err := c.Key(context.Background())
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 304 {
		t.Fatalf("got %v, want a 304 *Error", err)
	}
}

// TestBadAnswer: a 200 that is not JSON is an error, and not retried.
func TestBadAnswer(t *testing.T) {
	s := newScripted(t, step{status: 200, body: "<html>"}, step{status: 200, body: keyJSON})
	c := scriptedClient(t, s)
	if _, err := c.Key(context.Background()); err == nil {
		t.Fatal("a 200 with HTML: no error")
	}
	if n := len(s.asked()); n != 1 {
		t.Fatalf("requests: got %d, want 1", n)
	}
}

// TestRedirectsNotFollowed: the API never redirects, so a 3xx is an
// *Error with its status, and the request it points to is never made: the
// key (Authorization) goes nowhere but the base URL, also through an
// http.Client of the caller's (WithHTTPClient), which is left unchanged.
func TestRedirectsNotFollowed(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write([]byte(keyJSON)) //nolint:errcheck // the client's side is what the test checks
	}))
	t.Cleanup(target.Close)
	userClient := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		name   string
		status int
		opts   []Option
	}{
		{"own client, 302", http.StatusFound, nil},
		{"own client, 307", http.StatusTemporaryRedirect, nil},
		{"caller's client, 301", http.StatusMovedPermanently, []Option{WithHTTPClient(userClient)}},
		{"caller's client, 308", http.StatusPermanentRedirect, []Option{WithHTTPClient(userClient)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t, step{status: tc.status, header: map[string]string{"Location": target.URL + "/public/v1/key"}})
			c := scriptedClient(t, s, tc.opts...)
			_, err := c.Key(context.Background())
			var apiErr *Error
			if !errors.As(err, &apiErr) || apiErr.Status != tc.status {
				t.Fatalf("got %v, want a %d *Error", err, tc.status)
			}
			if n := len(s.asked()); n != 1 {
				t.Fatalf("requests to the API: %d, want 1 (a 3xx is not retried)", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(elsewhere) != 0 {
				t.Fatalf("the redirect was followed: the other server was asked with Authorization %q", elsewhere)
			}
		})
	}
	if userClient.CheckRedirect != nil {
		t.Fatal("WithHTTPClient changed the caller's http.Client")
	}
}

// TestInvalidIDsRefusedLocally: an id that is not a universal id is refused
// before any request, with an error errors.Is finds ErrInvalidID in (and
// no *Error: no answer came). In a path, "../key" would read /key and
// decode it into an empty event; in a snapshot, "a,b" would be two ids to
// the server and one to the client.
func TestInvalidIDsRefusedLocally(t *testing.T) {
	s := newScripted(t)
	c := scriptedClient(t, s)
	ctx := context.Background()
	many := make([]string, 0, 61)
	for i := range 60 {
		many = append(many, fmt.Sprintf("m%02d", i))
	}
	many = append(many, "m60/x") // in the second chunk: the first is not sent either
	bad := []string{"", "../key", "..", "a,b", "a/b", "a b", "a%2Fb", "é", strings.Repeat("a", 65)}
	calls := map[string]func(id string) error{
		"Event":  func(id string) error { _, err := c.Event(ctx, id); return err },
		"Trades": func(id string) error { _, err := c.Trades(ctx, id, 0); return err },
		"Snapshot": func(id string) error {
			_, err := c.Snapshot(ctx, []string{"ok-1", id})
			return err
		},
		"NewPoller": func(id string) error { _, err := c.NewPoller([]string{id, "ok-1"}, time.Second); return err },
		"Stream":    func(id string) error { _, err := c.Stream(ctx, []string{"ok-1", id}); return err },
	}
	for name, call := range calls {
		for _, id := range bad {
			err := call(id)
			var apiErr *Error
			if !errors.Is(err, ErrInvalidID) || errors.As(err, &apiErr) {
				t.Errorf("%s(%q): got %v, want an error wrapping ErrInvalidID and no *Error", name, id, err)
			}
		}
	}
	if _, err := c.Snapshot(ctx, many); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Snapshot of 61 ids, the last invalid: got %v, want ErrInvalidID", err)
	}
	if got := s.asked(); len(got) != 0 {
		t.Fatalf("invalid ids sent %d requests: %v", len(got), got)
	}
	// 64 characters of the pattern is an id: it is asked.
	if _, err := c.Event(ctx, strings.Repeat("a", 64)); errors.Is(err, ErrInvalidID) {
		t.Fatalf("a 64-character id refused: %v", err)
	}
	if n := len(s.asked()); n != 1 {
		t.Fatalf("a 64-character id: %d requests, want 1", n)
	}
}

// TestSnapshotAllOrNothing: of two chunks, one answers and the other fails:
// the call returns the failure, never half a snapshot.
func TestSnapshotAllOrNothing(t *testing.T) {
	ids := make([]string, 0, 60)
	for i := range 60 {
		ids = append(ids, fmt.Sprintf("m%02d", i))
	}
	// Whichever chunk asks first gets the 200, the other the 422.
	s := newScripted(t, step{status: 200, body: `{"data":[],"missing":[]}`},
		step{status: 422, body: `{"error":{"code":"invalid_request","message":"no"}}`})
	c := scriptedClient(t, s)
	snap, err := c.Snapshot(context.Background(), ids)
	var apiErr *Error
	if snap != nil || !errors.As(err, &apiErr) || apiErr.Status != 422 {
		t.Fatalf("got %+v %v, want the 422 and no snapshot", snap, err)
	}
}

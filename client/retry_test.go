package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketdata/marketdata/client"
	"github.com/marketdata/marketdata/internal/servicetest"
)

// exhaust spends the account's window with a client that never retries,
// until the service answers 429.
func exhaust(t *testing.T, s *servicetest.Service, secret string) {
	t.Helper()
	c, _ := newClient(t, s.URL(), secret, client.WithMaxRetries(0))
	for range 100 {
		_, err := c.Key(context.Background())
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("no 429 after 100 requests of a window of 3")
}

// TestRetry429 runs against a service whose window is 3 requests per 5 s:
// a 429 whose Retry-After is within WithMaxRetryAfter is waited out and
// retried; one asking for longer, or with retries off, is returned at once
// as an *Error carrying RetryAfter; a deadline shorter than the wait
// returns the 429 without sleeping into the deadline.
func TestRetry429(t *testing.T) {
	s := startService(t, map[string]string{"MD_RATE_LIMIT": "3", "MD_RATE_WINDOW": "5s"})

	t.Run("waited out", func(t *testing.T) {
		key := s.NewKey()
		c, rec := newClient(t, s.URL(), key.Secret)
		// The window may roll over between exhausting it and the call: then
		// the call needs no retry, and the scenario runs again.
		for try := 0; ; try++ {
			exhaust(t, s, key.Secret)
			rec.take()
			if _, err := c.Key(ctxT(t)); err != nil {
				t.Fatalf("a 429 within the cap: got %v, want success after waiting", err)
			}
			statuses, _ := rec.take()
			if statuses[len(statuses)-1] != 200 {
				t.Fatalf("statuses %v: want the last one 200", statuses)
			}
			for _, st := range statuses {
				if st != 200 && st != 429 {
					t.Fatalf("statuses %v: want only 429s and a 200", statuses)
				}
			}
			if slices.Contains(statuses, 429) {
				return
			}
			if try == 5 {
				t.Fatalf("the window never stayed exhausted for the next call (statuses %v)", statuses)
			}
		}
	})

	t.Run("over the cap", func(t *testing.T) {
		key := s.NewKey()
		c, rec := newClient(t, s.URL(), key.Secret, client.WithMaxRetryAfter(100*time.Millisecond))
		for try := 0; ; try++ {
			exhaust(t, s, key.Secret)
			rec.take()
			_, err := c.Key(ctxT(t))
			if err == nil && try < 5 {
				continue // the window rolled over in between
			}
			var apiErr *client.Error
			if !errors.As(err, &apiErr) || apiErr.Status != 429 || apiErr.Code != "rate_limited" ||
				apiErr.RetryAfter <= 100*time.Millisecond || apiErr.RetryAfter > 5*time.Second {
				t.Fatalf("a 429 over the cap: got %v, want the *Error with RetryAfter in (100ms, 5s]", err)
			}
			if statuses, _ := rec.take(); !slices.Equal(statuses, []int{429}) {
				t.Fatalf("a 429 over the cap: got requests %v, want one", statuses)
			}
			rl, ok := c.RateLimit()
			if !ok || rl.Limit != 3 || rl.Remaining != 0 {
				t.Fatalf("RateLimit after the 429: got %+v %v, want limit 3, none remaining", rl, ok)
			}
			return
		}
	})

	t.Run("deadline shorter than the wait", func(t *testing.T) {
		key := s.NewKey()
		c, rec := newClient(t, s.URL(), key.Secret)
		for try := 0; ; try++ {
			exhaust(t, s, key.Secret)
			rec.take()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_, err := c.Key(ctx)
			cancel()
			if err == nil && try < 5 {
				continue
			}
			var apiErr *client.Error
			statuses, _ := rec.take()
			if errors.As(err, &apiErr) && apiErr.Status == 429 && apiErr.RetryAfter > 200*time.Millisecond {
				if !slices.Equal(statuses, []int{429}) {
					t.Fatalf("got requests %v, want one", statuses)
				}
				return
			}
			if try == 5 {
				t.Fatalf("got %v (requests %v), want the 429 *Error returned before the deadline", err, statuses)
			}
		}
	})
}

// faultProxy is a reverse proxy in front of an API node that answers 503,
// or cuts the connection, while its counters say so.
type faultProxy struct {
	*httptest.Server
	fail503  atomic.Int32 // answer 503 this many more times
	cut      atomic.Int32 // close the connection without an answer this many more times
	requests atomic.Int32
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &faultProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if p.cut.Add(-1) >= 0 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if p.fail503.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Request-Id", "proxy-503")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":"unavailable","message":"dependency down (test proxy)"}}`)) //nolint:errcheck // the client's side of this is the test
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// TestRetry503AndNetwork puts a proxy that fails on cue in front of a real
// node: 503s and cut connections are retried with backoff up to
// WithMaxRetries, the last failure returned after that, and ctx bounds the
// whole.
func TestRetry503AndNetwork(t *testing.T) {
	s := startService(t, nil)
	s.Seed("r", 2, 1)
	key := s.NewKey()
	p := newFaultProxy(t, s.URL())

	t.Run("503 then success", func(t *testing.T) {
		c, rec := newClient(t, p.URL, key.Secret)
		p.fail503.Store(3)
		ev, err := c.Event(ctxT(t), "r-e001")
		if err != nil || ev.UniversalID != "r-e001" {
			t.Fatalf("after 3 503s: got %v %v, want the event", ev, err)
		}
		if statuses, _ := rec.take(); !slices.Equal(statuses, []int{503, 503, 503, 200}) {
			t.Fatalf("requests: got %v, want 3 503s and a 200", statuses)
		}
	})

	t.Run("503 beyond the retries", func(t *testing.T) {
		c, rec := newClient(t, p.URL, key.Secret, client.WithMaxRetries(2))
		p.fail503.Store(10)
		defer p.fail503.Store(0)
		_, err := c.Event(ctxT(t), "r-e001")
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Status != 503 || apiErr.Code != "unavailable" || apiErr.RequestID != "proxy-503" {
			t.Fatalf("503 throughout: got %v, want the 503 *Error", err)
		}
		if statuses, _ := rec.take(); !slices.Equal(statuses, []int{503, 503, 503}) {
			t.Fatalf("requests: got %v, want 1 + 2 retries", statuses)
		}
	})

	t.Run("cut connections then success", func(t *testing.T) {
		c, _ := newClient(t, p.URL, key.Secret)
		p.requests.Store(0)
		p.cut.Store(3)
		ev, err := c.Event(ctxT(t), "r-e002")
		if err != nil || ev.UniversalID != "r-e002" {
			t.Fatalf("after 3 cut connections: got %v %v, want the event", ev, err)
		}
		if n := p.requests.Load(); n < 4 {
			t.Fatalf("proxy saw %d requests, want at least 4", n)
		}
	})

	t.Run("cut connections, retries off", func(t *testing.T) {
		c, _ := newClient(t, p.URL, key.Secret, client.WithMaxRetries(0))
		p.cut.Store(1000)
		defer p.cut.Store(0)
		_, err := c.Event(ctxT(t), "r-e002")
		var apiErr *client.Error
		if err == nil || errors.As(err, &apiErr) {
			t.Fatalf("a cut connection: got %v, want a network error (no *Error)", err)
		}
	})

	t.Run("ctx bounds the retries", func(t *testing.T) {
		c, _ := newClient(t, p.URL, key.Secret, client.WithMaxRetries(1000), client.WithBackoff(200*time.Millisecond, 400*time.Millisecond))
		p.fail503.Store(1 << 30)
		defer p.fail503.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Event(ctx, "r-e001")
		var apiErr *client.Error
		if err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &apiErr) && apiErr.Status == 503) {
			t.Fatalf("503 forever under a 1 s deadline: got %v, want the deadline or the last 503", err)
		}
		// 1000 retries of at least 100 ms each would take minutes.
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("the call returned after %v: ctx did not bound it", d)
		}
	})

	t.Run("cancel while waiting", func(t *testing.T) {
		c, _ := newClient(t, p.URL, key.Secret, client.WithBackoff(time.Hour, time.Hour))
		p.fail503.Store(1 << 30)
		defer p.fail503.Store(0)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := c.Event(ctx, "r-e001"); errc <- err }()
		s.Await("the first 503 answered", func() (bool, string) { return p.fail503.Load() < 1<<30, "" })
		cancel()
		select {
		case err := <-errc:
			var apiErr *client.Error
			if !errors.Is(err, context.Canceled) || !errors.As(err, &apiErr) || apiErr.Status != 503 {
				t.Fatalf("cancelled while waiting to retry: got %v, want context.Canceled wrapping the 503", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the call did not return after its context was cancelled")
		}
	})
}

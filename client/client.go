// Package client is the Go client of the marketdata public API
// (/public/v1): typed answers, typed errors, retries that respect the
// server's limits, cursor walks as iterators, a snapshot poller and a price
// stream that reconnects by itself.
//
// It depends on nothing else of the marketdata module, so importing it pulls
// in no server code.
package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultBaseURL is where `marketdata dev` serves the API.
const DefaultBaseURL = "http://127.0.0.1:8080"

// Defaults of the retry options.
const (
	DefaultMaxRetries    = 4
	DefaultMaxRetryAfter = 60 * time.Second
	DefaultMinBackoff    = 200 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
)

// Client calls the public API with one key. It is safe for concurrent use.
type Client struct {
	base      *url.URL // scheme and host, with any path prefix, without a trailing slash
	key       string
	hc        *http.Client
	userAgent string

	maxRetries    int
	maxRetryAfter time.Duration
	minBackoff    time.Duration
	maxBackoff    time.Duration

	rlMu sync.Mutex
	rl   RateLimit // the latest answer's rate-limit headers, see RateLimit
}

// Option configures a Client.
type Option func(*Client) error

// WithBaseURL sets the API's base URL, such as "https://api.example.com"
// (default DefaultBaseURL). Paths are appended to it: "/public/v1/...".
func WithBaseURL(raw string) Option {
	return func(c *Client) error {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("client: base URL %q: %w", raw, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("client: base URL %q: want http:// or https:// and a host", raw)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("client: base URL %q: no query, fragment or user info allowed", raw)
		}
		u.Path = strings.TrimRight(u.Path, "/")
		u.RawPath = ""
		c.base = u
		return nil
	}
}

// WithHTTPClient sets the HTTP client requests go through (default: a client
// of its own with a 30 s timeout per attempt). The stream dials with its
// transport too.
//
// The client never follows a redirect (the API sends none; following one
// would send the key to wherever it points, over plain http even): it uses
// a copy of hc whose CheckRedirect refuses them, so a 3xx answer is an
// *Error with its status. hc itself is not changed; its transport, jar and
// timeout are shared.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("client: WithHTTPClient: nil client")
		}
		c.hc = hc
		return nil
	}
}

// WithMaxRetries sets how many times one call is retried after a 429, a
// 502, 503 or 504, or a network error (default DefaultMaxRetries; 0 turns
// retries off).
func WithMaxRetries(n int) Option {
	return func(c *Client) error {
		if n < 0 {
			return fmt.Errorf("client: WithMaxRetries: %d is negative", n)
		}
		c.maxRetries = n
		return nil
	}
}

// WithMaxRetryAfter caps the wait the client accepts from a Retry-After
// header (default DefaultMaxRetryAfter). A 429 that asks for longer is not
// retried: its *Error is returned at once, with RetryAfter set, so the
// caller decides.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(c *Client) error {
		if d < 0 {
			return fmt.Errorf("client: WithMaxRetryAfter: %v is negative", d)
		}
		c.maxRetryAfter = d
		return nil
	}
}

// WithBackoff sets the jittered exponential backoff between retries of
// 502s, 503s, 504s and network errors, and between stream reconnects: from min, doubling, at
// most max (defaults DefaultMinBackoff and DefaultMaxBackoff).
func WithBackoff(minWait, maxWait time.Duration) Option {
	return func(c *Client) error {
		if minWait <= 0 || maxWait < minWait {
			return fmt.Errorf("client: WithBackoff: want 0 < min ≤ max, got %v and %v", minWait, maxWait)
		}
		c.minBackoff, c.maxBackoff = minWait, maxWait
		return nil
	}
}

// WithUserAgent sets the User-Agent header (default "marketdata-go").
func WithUserAgent(ua string) Option {
	return func(c *Client) error {
		c.userAgent = ua
		return nil
	}
}

// New returns a client that authenticates with key, the secret
// "mdk_live_…" that `marketdata key create` printed.
func New(key string, opts ...Option) (*Client, error) {
	if key == "" {
		return nil, errors.New("client: empty key")
	}
	c := &Client{
		key:           key,
		hc:            &http.Client{Timeout: 30 * time.Second},
		userAgent:     "marketdata-go",
		maxRetries:    DefaultMaxRetries,
		maxRetryAfter: DefaultMaxRetryAfter,
		minBackoff:    DefaultMinBackoff,
		maxBackoff:    DefaultMaxBackoff,
	}
	if err := WithBaseURL(DefaultBaseURL)(c); err != nil {
		return nil, err
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	hc := *c.hc // a copy: the caller's client stays as it is
	hc.CheckRedirect = noRedirects
	c.hc = &hc
	return c, nil
}

// noRedirects is the CheckRedirect of the client's http.Client: the 3xx
// answer itself is returned (and becomes an *Error), its Location is never
// asked, so the Authorization header goes nowhere but the base URL.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Error is an error answer of the API (contract §2): its status and the
// body's code and message. errors.As finds it in every error a method
// returns for an answer the server gave.
type Error struct {
	// Status is the HTTP status (401, 403, 404, 422, 429, 503, ...).
	Status int
	// Code is the body's error.code: unauthorized, ip_not_allowed,
	// access_not_granted, insufficient_scope, not_found, invalid_request,
	// rate_limited, origin_not_allowed or unavailable.
	Code string
	// Message is the body's human-readable error.message.
	Message string
	// MergedInto is the event the asked-for event was merged into (a 404
	// not_found only), else "".
	MergedInto string
	// RetryAfter is the Retry-After header of a 429 (or a 502, 503, 504), else 0.
	RetryAfter time.Duration
	// RequestID is the answer's X-Request-Id: quote it when reporting a
	// problem.
	RequestID string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("marketdata: %d %s: %s", e.Status, e.Code, e.Message)
	if e.MergedInto != "" {
		s += " (merged into " + e.MergedInto + ")"
	}
	if e.RequestID != "" {
		s += " [request " + e.RequestID + "]"
	}
	return s
}

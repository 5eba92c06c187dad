package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds what the client reads of one answer: the largest the API
// sends (a page of 100 events, a snapshot of 50 prices) is far below it.
const maxBody = 16 << 20

// RateLimit is what the API said about the account's request window in
// the RateLimit-* headers of an answer (contract §2): answers that passed
// the window check carry them (200, 304, 404, 422 and the window's own 429).
type RateLimit struct {
	// Limit is the number of requests of one window (RateLimit-Limit).
	Limit int
	// Remaining is how many are left in the window (RateLimit-Remaining).
	Remaining int
	// Reset is how long until the window frees capacity (RateLimit-Reset).
	Reset time.Duration
	// At is when the client received the answer.
	At time.Time
}

// RateLimit returns the rate-limit headers of the latest answer that
// carried them (by arrival, over all calls of the client), and false
// before any did. The account's window is shared by all its keys and all
// callers, so Remaining is a snapshot, not a reservation.
func (c *Client) RateLimit() (RateLimit, bool) {
	c.rlMu.Lock()
	defer c.rlMu.Unlock()
	return c.rl, !c.rl.At.IsZero()
}

func (c *Client) noteRateLimit(h http.Header) {
	limit, err1 := strconv.Atoi(h.Get("RateLimit-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("RateLimit-Remaining"))
	reset, err3 := strconv.Atoi(h.Get("RateLimit-Reset"))
	if err1 != nil || err2 != nil || err3 != nil || limit < 0 || remaining < 0 || reset < 0 || reset > maxRetryAfterSeconds {
		return
	}
	rl := RateLimit{Limit: limit, Remaining: remaining, Reset: time.Duration(reset) * time.Second, At: time.Now()}
	c.rlMu.Lock()
	if rl.At.After(c.rl.At) {
		c.rl = rl
	}
	c.rlMu.Unlock()
}

// answer is what one successful call returned besides its decoded body.
type answer struct {
	etag        string
	notModified bool
}

// do GETs /public/v1+path (path escaped, see url.PathEscape) with query, decodes a 200 answer's body into out
// (when not nil) and returns the answer's ETag; with etag set it sends
// If-None-Match and reports a 304 as notModified (out untouched). Error
// answers become *Error; 429, 502, 503, 504 and network errors are retried
// per the client's options, every wait bounded by ctx.
func (c *Client) do(ctx context.Context, path string, query url.Values, etag string, out any) (answer, error) {
	// path holds escaped segments (an id with "/" or "%" stays one
	// segment): set the escaped form and the plain one that matches it.
	u := *c.base
	u.RawPath = c.base.EscapedPath() + "/public/v1" + path
	plain, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return answer{}, fmt.Errorf("marketdata: path %q: %w", u.RawPath, err)
	}
	u.Path = plain
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	target := u.String()
	for attempt := 0; ; attempt++ {
		a, err := c.once(ctx, target, etag, out)
		if err == nil {
			return a, nil
		}
		wait, retry := c.retryWait(ctx, err, attempt)
		if !retry {
			return answer{}, err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			// Sleeping into the deadline would only turn this answer into
			// "context deadline exceeded": return what the server said.
			return answer{}, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return answer{}, fmt.Errorf("marketdata: GET %s: %w (while waiting to retry after: %w)", path, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// retryWait says whether err (of attempt, counted from 0) is retried, and
// after how long.
func (c *Client) retryWait(ctx context.Context, err error, attempt int) (time.Duration, bool) {
	if ctx.Err() != nil || attempt >= c.maxRetries {
		return 0, false
	}
	var apiErr *Error
	if !errors.As(err, &apiErr) {
		var ne *networkError
		return c.backoff(attempt), errors.As(err, &ne)
	}
	switch apiErr.Status {
	case http.StatusTooManyRequests:
		if apiErr.RetryAfter > c.maxRetryAfter {
			return 0, false
		}
		if apiErr.RetryAfter > 0 {
			return apiErr.RetryAfter, true
		}
		return c.backoff(attempt), true
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		// 503 is the API's own "unavailable"; 502 and 504 come from a load
		// balancer or proxy in front of it (a node restarting). The stream's
		// upgrade retries the same three.
		wait := c.backoff(attempt)
		if apiErr.RetryAfter > wait && apiErr.RetryAfter <= c.maxRetryAfter {
			wait = apiErr.RetryAfter
		}
		return wait, true
	default:
		return 0, false
	}
}

// backoff is the jittered exponential wait before retry attempt+1: a
// random time in [d/2, d], d = minBackoff·2^attempt capped at maxBackoff,
// so clients that failed together do not come back together.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.maxBackoff
	if attempt < 32 {
		if e := c.minBackoff << attempt; e > 0 && e < d {
			d = e
		}
	}
	return d/2 + rand.N(d/2+1)
}

// networkError is a request that got no complete answer: the connection
// failed, or broke while the answer was read. It is retried.
type networkError struct{ err error }

func (e *networkError) Error() string { return e.err.Error() }
func (e *networkError) Unwrap() error { return e.err }

// once sends one request.
func (c *Client) once(ctx context.Context, target, etag string, out any) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return answer{}, fmt.Errorf("marketdata: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return answer{}, fmt.Errorf("marketdata: GET %s: %w", req.URL.Path, ctx.Err())
		}
		return answer{}, &networkError{fmt.Errorf("marketdata: GET %s: %w", req.URL.Path, err)}
	}
	defer resp.Body.Close()
	c.noteRateLimit(resp.Header)
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return answer{}, fmt.Errorf("marketdata: GET %s: read answer: %w", req.URL.Path, ctx.Err())
		}
		return answer{}, &networkError{fmt.Errorf("marketdata: GET %s: read answer: %w", req.URL.Path, err)}
	}
	if len(body) > maxBody {
		return answer{}, fmt.Errorf("marketdata: GET %s: answer over %d bytes", req.URL.Path, maxBody)
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && etag != "":
		return answer{etag: etag, notModified: true}, nil
	case resp.StatusCode == http.StatusOK:
		if out != nil {
			if err := json.Unmarshal(body, out); err != nil {
				return answer{}, fmt.Errorf("marketdata: GET %s: decode answer: %w", req.URL.Path, err)
			}
		}
		return answer{etag: resp.Header.Get("ETag")}, nil
	default:
		return answer{}, errorOf(resp, body)
	}
}

// errorOf makes the *Error of an error answer. A body that is not the
// API's error shape (a proxy's page, say) leaves Code empty and keeps the
// status text as Message.
func errorOf(resp *http.Response, body []byte) *Error {
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var wire struct {
		Error struct {
			Code       string `json:"code"`
			Message    string `json:"message"`
			MergedInto string `json:"merged_into"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &wire) == nil && wire.Error.Code != "" {
		e.Code, e.Message, e.MergedInto = wire.Error.Code, wire.Error.Message, wire.Error.MergedInto
	} else {
		e.Message = http.StatusText(resp.StatusCode)
		if s := strings.TrimSpace(string(body)); s != "" && len(s) <= 200 {
			e.Message += ": " + s
		}
	}
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// maxRetryAfterSeconds caps a parsed Retry-After (about 31 years) so that
// it fits a time.Duration.
const maxRetryAfterSeconds = 1e9

// parseRetryAfter reads Retry-After as seconds or as an HTTP date (RFC 9110
// §10.2.3); 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		// delay-seconds: digits only; absurd values are capped, not wrapped.
		n, err := strconv.ParseUint(v, 10, 64)
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			n, err = maxRetryAfterSeconds, nil
		}
		if err != nil {
			return 0
		}
		return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

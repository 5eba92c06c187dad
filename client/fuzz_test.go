package client

import (
	"net/http"
	"testing"
	"time"
)

// The client reads answers of a server it does not control (or of a proxy
// in front of it): the headers and error bodies it parses are untrusted.

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "1", "120", "-1", "1.5", "1e400", "NaN", "Tue, 24 Nov 2026 09:00:00 GMT", "soon"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d := parseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("parseRetryAfter(%q) = %v: negative", v, d)
		}
	})
}

func FuzzErrorOf(f *testing.F) {
	f.Add(404, `{"error":{"code":"not_found","message":"gone","merged_into":"ev-2"}}`, "3")
	f.Add(503, "<html>bad gateway</html>", "")
	f.Add(429, `{"error":{"code":"rate_limited"}}`, "Tue, 24 Nov 2026 09:00:00 GMT")
	f.Add(422, `{"error":null}`, "x")
	f.Add(418, `[]`, "-5")
	f.Fuzz(func(t *testing.T, status int, body, retryAfter string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		e := errorOf(&http.Response{StatusCode: status, Header: h}, []byte(body))
		if e.Status != status || e.RetryAfter < 0 {
			t.Fatalf("errorOf(%d, %q): %+v", status, body, e)
		}
		if e.Code == "" && len(e.Message) > len(http.StatusText(status))+2+200 {
			t.Fatalf("errorOf(%d, %q): message of %d bytes, want the body cut out when long", status, body, len(e.Message))
		}
		_ = e.Error()
	})
}

func FuzzNoteRateLimit(f *testing.F) {
	f.Add("1200", "1199", "60")
	f.Add("x", "", "-1")
	f.Add("10", "0", "0.5")
	f.Fuzz(func(t *testing.T, limit, remaining, reset string) {
		c, err := New("k")
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("RateLimit-Limit", limit)
		h.Set("RateLimit-Remaining", remaining)
		h.Set("RateLimit-Reset", reset)
		c.noteRateLimit(h)
		if rl, ok := c.RateLimit(); ok && (rl.Limit < 0 || rl.Remaining < 0 || rl.Reset < 0) {
			t.Fatalf("RateLimit of %q %q %q: %+v", limit, remaining, reset, rl)
		}
	})
}

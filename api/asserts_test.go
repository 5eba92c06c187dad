package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// keyInfo is the answer of GET /public/v1/key.
type keyInfo struct {
	KeyID       string    `json:"key_id"`
	Last4       string    `json:"last4"`
	AccountID   string    `json:"account_id"`
	Scopes      []string  `json:"scopes"`
	IPAllowlist []string  `json:"ip_allowlist"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	Limit       int       `json:"limit"`
	WindowS     int64     `json:"window_s"`
}

// wantBasics checks what every answer carries: a request id and no cookie.
func wantBasics(t *testing.T, a answer) {
	t.Helper()
	if got := a.header.Get("X-Request-Id"); got == "" {
		t.Errorf("X-Request-Id missing (status %d)", a.status)
	}
	if got := a.header.Values("Set-Cookie"); len(got) != 0 {
		t.Errorf("Set-Cookie = %q, want none", got)
	}
}

// wantOK checks a 200 key answer and returns it.
func wantOK(t *testing.T, a answer) keyInfo {
	t.Helper()
	wantBasics(t, a)
	if a.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", a.status, a.body)
	}
	if got := a.header.Get("Content-Type"); !strings.HasPrefix(got, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	var k keyInfo
	if err := json.Unmarshal(a.body, &k); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
	return k
}

// wantError checks a contract error answer: status, exact body shape, a
// message naming what was wrong, and the headers its status requires.
func wantError(t *testing.T, a answer, status int, code, msgHas string) {
	t.Helper()
	wantBasics(t, a)
	if a.status != status {
		t.Errorf("status = %d, want %d; body %s", a.status, status, a.body)
	}
	if got := a.header.Get("Content-Type"); !strings.HasPrefix(got, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	var body map[string]map[string]any
	if err := json.Unmarshal(a.body, &body); err != nil || len(body) != 1 || body["error"] == nil {
		t.Fatalf("body = %s, want {\"error\":{...}} (%v)", a.body, err)
	}
	e := body["error"]
	if got := e["code"]; got != code {
		t.Errorf("code = %v, want %s", got, code)
	}
	msg, _ := e["message"].(string)
	if msg == "" || !strings.Contains(msg, msgHas) {
		t.Errorf("message = %q, want one containing %q", msg, msgHas)
	}
	if len(e) != 2 {
		t.Errorf("error object = %s, want exactly code and message", a.body)
	}
	wantAuth := ""
	if status == http.StatusUnauthorized {
		wantAuth = `Bearer realm="public-api"`
	}
	if got := a.header.Get("WWW-Authenticate"); got != wantAuth {
		t.Errorf("WWW-Authenticate = %q, want %q", got, wantAuth)
	}
	retry := a.header.Get("Retry-After")
	if (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) != (retry != "") {
		t.Errorf("Retry-After = %q on a %d", retry, status)
	}
}

var limitHeaders = []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}

// wantLimitHeaders checks that the RateLimit headers are all present or all absent.
func wantLimitHeaders(t *testing.T, a answer, present bool) {
	t.Helper()
	for _, h := range limitHeaders {
		if got := a.header.Get(h); (got != "") != present {
			t.Errorf("%s = %q on a %d, want present = %v", h, got, a.status, present)
		}
	}
}

// errMessage is the message of an error answer.
func errMessage(t *testing.T, a answer) string {
	t.Helper()
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
	return body.Error.Message
}

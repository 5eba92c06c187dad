package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/store"
)

// scopedPath is a test-only route behind the full guard with a scope; it
// cannot live under /public/v1, whose catch-all answers 404 first.
const scopedPath = "/scoped-test"

// TestErrorTable reaches every row of the contract's error table (§2) through
// GET /public/v1/key, plus an unknown route, a preflight, a scoped test route
// and a node whose Postgres is gone. 422 invalid_request is not reachable:
// /key takes no parameters and unknown ones are ignored (checked below).
// Every row comes from its own client address (X-Forwarded-For through a
// trusted loopback proxy), so failed-authentication counts stay apart.
func TestErrorTable(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, withTrusted("127.0.0.1/32"), withAuthFailLimit(3), withLimit(2),
		withSetup(func(s *api.Server) { s.AddScopedTestRoute(scopedPath, store.ScopeMarketsRead) }))

	// A node whose Postgres pool is closed cannot check keys: 503, never 500.
	closed, err := store.Connect(t.Context(), w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	down := w.node(t, withCredentials(store.New(closed)))

	valid, _ := w.newKey(t, keyOpts{})
	scoped, _ := w.newKey(t, keyOpts{scopes: []string{store.ScopeMarketsRead}})
	revoked, rk := w.newKey(t, keyOpts{})
	w.revoke(t, rk.ID)
	now := w.clock.Now()
	expired, _ := w.newKey(t, keyOpts{created: now.Add(-2 * time.Hour), expires: now.Add(-time.Minute)})
	elsewhere, _ := w.newKey(t, keyOpts{allow: []string{"10.0.0.0/8"}})
	noAccess, nk := w.newKey(t, keyOpts{})
	w.setAccess(t, nk.AccountID, false)
	busy, _ := w.newKey(t, keyOpts{})
	tail := valid[len(store.SecretPrefix)+1:] // 42 characters

	tests := []struct {
		name   string
		node   *node
		method string
		path   string
		prep   func(t *testing.T, addr string) // runs first, from the row's address
		auth   string                          // the Authorization value; "" sends none
		extra  []string
		fresh  bool // send a valid key of a fresh account instead of auth
		status int
		code   string
		msgHas string
		window bool // the answer passed the window check: RateLimit headers
	}{
		{name: "no key", status: 401, code: "unauthorized", msgHas: "no API key"},
		{name: "empty bearer", auth: "Bearer", status: 401, code: "unauthorized", msgHas: "malformed"},
		{name: "other scheme", auth: "Basic " + valid, status: 401, code: "unauthorized", msgHas: "malformed"},
		{name: "wrong prefix", auth: "Bearer mdk_test_" + valid[len(store.SecretPrefix):], status: 401, code: "unauthorized", msgHas: "malformed"},
		{name: "42 characters", auth: "Bearer mdk_live_" + tail, status: 401, code: "unauthorized", msgHas: "truncated"},
		{name: "44 characters", auth: "Bearer " + valid + "A", status: 401, code: "unauthorized", msgHas: "malformed"},
		{name: "bad character", auth: "Bearer mdk_live_" + tail + "+", status: 401, code: "unauthorized", msgHas: "malformed"},
		{name: "mistyped", auth: "Bearer " + mistype(valid, 20), status: 401, code: "unauthorized", msgHas: "mistyped or truncated"},
		{name: "checksum altered", auth: "Bearer " + mistype(valid, len(valid)-1), status: 401, code: "unauthorized", msgHas: "mistyped or truncated"},
		{name: "unknown", auth: "Bearer " + store.NewSecret(), status: 401, code: "unauthorized", msgHas: "unknown"},
		{name: "revoked", auth: "Bearer " + revoked, status: 401, code: "unauthorized", msgHas: "revoked"},
		{name: "expired", auth: "Bearer " + expired, status: 401, code: "unauthorized", msgHas: "expired"},
		{name: "ip not allowed", auth: "Bearer " + elsewhere, status: 403, code: "ip_not_allowed", msgHas: "may not be used from 192.0.2."},
		{name: "access not granted", auth: "Bearer " + noAccess, status: 403, code: "access_not_granted", msgHas: "access"},
		{name: "insufficient scope", path: scopedPath, fresh: true, status: 403, code: "insufficient_scope", msgHas: store.ScopeMarketsRead},
		{name: "unknown route", path: "/public/v1/nope", fresh: true, status: 404, code: "not_found", msgHas: "route", window: true},
		{name: "unknown route without key", path: "/public/v1/nope", status: 401, code: "unauthorized", msgHas: "no API key"},
		{name: "unknown route outside v1", path: "/nope", status: 404, code: "not_found", msgHas: "route"},
		{name: "POST", method: http.MethodPost, fresh: true, status: 404, code: "not_found", msgHas: "route", window: true},
		{
			name: "window exhausted", auth: "Bearer " + busy, status: 429, code: "rate_limited", msgHas: "limit", window: true,
			prep: func(t *testing.T, addr string) {
				waitRoomInWindow(t, w, time.Minute, 10*time.Second)
				for range 2 {
					wantOK(t, n.get(t, "/public/v1/key", busy, "X-Forwarded-For", addr))
				}
			},
		},
		{
			name: "failed authentications", auth: "Bearer " + valid, status: 429, code: "rate_limited", msgHas: "failed authentications",
			prep: func(t *testing.T, addr string) {
				for range 3 {
					wantError(t, n.get(t, "/public/v1/key", store.NewSecret(), "X-Forwarded-For", addr), 401, "unauthorized", "unknown")
				}
			},
		},
		{
			name: "preflight from another origin", method: http.MethodOptions,
			extra:  []string{"Origin", evilOrigin, "Access-Control-Request-Method", "GET"},
			status: 400, code: "origin_not_allowed", msgHas: evilOrigin,
		},
		{name: "postgres down", node: down, auth: "Bearer " + valid, status: 503, code: "unavailable", msgHas: "try again"},
		// The checksum needs no lookup: a mistyped key is refused even so.
		{name: "mistyped, postgres down", node: down, auth: "Bearer " + mistype(valid, 20), status: 401, code: "unauthorized", msgHas: "mistyped or truncated"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := fmt.Sprintf("192.0.2.%d", i+1)
			if tt.prep != nil {
				tt.prep(t, addr)
			}
			nd, method, path := tt.node, tt.method, tt.path
			if nd == nil {
				nd = n
			}
			if method == "" {
				method = http.MethodGet
			}
			if path == "" {
				path = "/public/v1/key"
			}
			h := http.Header{"X-Forwarded-For": {addr}}
			if tt.auth != "" {
				h.Set("Authorization", tt.auth)
			}
			if tt.fresh {
				secret, _ := w.newKey(t, keyOpts{})
				h.Set("Authorization", "Bearer "+secret)
			}
			for j := 0; j+1 < len(tt.extra); j += 2 {
				h.Add(tt.extra[j], tt.extra[j+1])
			}
			a := nd.do(t, method, path, h)
			wantError(t, a, tt.status, tt.code, tt.msgHas)
			wantLimitHeaders(t, a, tt.window)
		})
	}

	t.Run("scoped route with its scope", func(t *testing.T) {
		a := n.get(t, scopedPath, scoped, "X-Forwarded-For", "192.0.2.200")
		if a.status != http.StatusOK {
			t.Fatalf("status = %d, want 200; body %s", a.status, a.body)
		}
		wantBasics(t, a)
		wantLimitHeaders(t, a, true)
	})
	t.Run("unknown parameters are ignored", func(t *testing.T) {
		a := n.get(t, "/public/v1/key?limit=abc&cursor=%00", valid, "X-Forwarded-For", "192.0.2.201")
		if k := wantOK(t, a); k.Last4 != valid[len(valid)-4:] {
			t.Errorf("last4 = %q, want %q", k.Last4, valid[len(valid)-4:])
		}
	})
}

// TestKeyAnswer checks the 200 of /key: its fields, RateLimit headers and
// the request id (the caller's plain token is kept, anything else replaced).
func TestKeyAnswer(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, withLimit(5))
	secret, k := w.newKey(t, keyOpts{scopes: []string{store.ScopeMarketsRead}, allow: []string{"127.0.0.0/8", "::1/128"}})

	a := n.get(t, "/public/v1/key", secret, "X-Request-Id", "req-12345678")
	got := wantOK(t, a)
	want := keyInfo{
		KeyID: k.ID, Last4: secret[len(secret)-4:], AccountID: k.AccountID, Scopes: []string{"markets:read"},
		IPAllowlist: []string{"127.0.0.0/8", "::1/128"}, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt,
		Limit: 5, WindowS: 60,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("key = %+v, want %+v", got, want)
	}
	if strings.Contains(string(a.body), "mdk_live_") {
		t.Errorf("body %s holds a secret", a.body)
	}
	wantLimitHeaders(t, a, true)
	if got, want := a.header.Get("RateLimit-Limit"), "5"; got != want {
		t.Errorf("RateLimit-Limit = %q, want %q", got, want)
	}
	if got, want := a.header.Get("RateLimit-Remaining"), "4"; got != want {
		t.Errorf("RateLimit-Remaining = %q, want %q", got, want)
	}
	if got, want := a.header.Get("X-Request-Id"), "req-12345678"; got != want {
		t.Errorf("X-Request-Id = %q, want the caller's %q", got, want)
	}
	a = n.get(t, "/public/v1/key", secret, "X-Request-Id", "bad id\twith spaces")
	if got := a.header.Get("X-Request-Id"); got == "" || strings.Contains(got, " ") {
		t.Errorf("X-Request-Id = %q, want a fresh token", got)
	}
}

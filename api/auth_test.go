package api_test

import (
	"net/http"
	"testing"
	"time"
)

// TestOrderOfChecks pins contract §2: failed-auth block (429) → key (401) →
// access (403) → IP allowlist (403) → scope (403, in TestErrorTable) →
// per-account window (429).
func TestOrderOfChecks(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, withTrusted("127.0.0.1/32"), withAuthFailLimit(3), withLimit(2))
	from := func(addr string) []string { return []string{"X-Forwarded-For", addr} }

	t.Run("blocked address before a valid key", func(t *testing.T) {
		valid, _ := w.newKey(t, keyOpts{})
		for i := range 3 {
			// The failure that reaches the threshold still gets its 401.
			a := n.get(t, "/public/v1/key", "", from("198.51.100.1")...)
			if a.status != http.StatusUnauthorized {
				t.Fatalf("failure %d: status = %d, want 401", i+1, a.status)
			}
			wantLimitHeaders(t, a, false)
		}
		a := n.get(t, "/public/v1/key", valid, from("198.51.100.1")...)
		wantError(t, a, 429, "rate_limited", "failed authentications")
		wantLimitHeaders(t, a, false)
		a = n.get(t, "/public/v1/key", "", from("198.51.100.1")...)
		wantError(t, a, 429, "rate_limited", "failed authentications")
		// Another address is not blocked.
		wantOK(t, n.get(t, "/public/v1/key", valid, from("198.51.100.2")...))
	})

	t.Run("revoked key before missing access", func(t *testing.T) {
		secret, k := w.newKey(t, keyOpts{})
		w.revoke(t, k.ID)
		w.setAccess(t, k.AccountID, false)
		wantError(t, n.get(t, "/public/v1/key", secret, from("198.51.100.3")...), 401, "unauthorized", "revoked")
	})

	t.Run("expired key before missing access", func(t *testing.T) {
		now := w.clock.Now()
		secret, k := w.newKey(t, keyOpts{created: now.Add(-time.Hour), expires: now.Add(-time.Second)})
		w.setAccess(t, k.AccountID, false)
		wantError(t, n.get(t, "/public/v1/key", secret, from("198.51.100.4")...), 401, "unauthorized", "expired")
	})

	t.Run("missing access before the allowlist", func(t *testing.T) {
		secret, k := w.newKey(t, keyOpts{allow: []string{"10.0.0.0/8"}})
		w.setAccess(t, k.AccountID, false)
		a := n.get(t, "/public/v1/key", secret, from("198.51.100.5")...)
		wantError(t, a, 403, "access_not_granted", "access")
		wantLimitHeaders(t, a, false)
	})

	t.Run("allowlist before the window", func(t *testing.T) {
		acc := w.account(t, true)
		outside, _ := w.key(t, acc, keyOpts{allow: []string{"10.0.0.0/8"}})
		inside, _ := w.key(t, acc, keyOpts{})
		for range 3 {
			a := n.get(t, "/public/v1/key", outside, from("198.51.100.6")...)
			wantError(t, a, 403, "ip_not_allowed", "198.51.100.6")
			wantLimitHeaders(t, a, false)
		}
		// The refused requests were never counted in the account's window.
		waitRoomInWindow(t, w, time.Minute, 10*time.Second)
		for i, remaining := range []string{"1", "0"} {
			a := n.get(t, "/public/v1/key", inside, from("198.51.100.6")...)
			wantOK(t, a)
			wantLimitHeaders(t, a, true)
			if got := a.header.Get("RateLimit-Remaining"); got != remaining {
				t.Errorf("request %d: RateLimit-Remaining = %q, want %q", i+1, got, remaining)
			}
		}
		a := n.get(t, "/public/v1/key", inside, from("198.51.100.6")...)
		wantError(t, a, 429, "rate_limited", "limit")
		wantLimitHeaders(t, a, true)
		if got := a.header.Get("RateLimit-Remaining"); got != "0" {
			t.Errorf("RateLimit-Remaining = %q on the window's 429, want 0", got)
		}
		// The allowlist still answers first once the window is used up.
		wantError(t, n.get(t, "/public/v1/key", outside, from("198.51.100.6")...), 403, "ip_not_allowed", "198.51.100.6")
	})
}

// TestExpiry: expiry is judged on the injected clock, also for a key the
// node has cached.
func TestExpiry(t *testing.T) {
	w := newWorld(t)
	n := w.node(t)

	t.Run("expired at creation", func(t *testing.T) {
		now := w.clock.Now()
		secret, _ := w.newKey(t, keyOpts{created: now.Add(-48 * time.Hour), expires: now.Add(-time.Millisecond)})
		wantError(t, n.get(t, "/public/v1/key", secret), 401, "unauthorized", "expired")
	})

	t.Run("expires while cached", func(t *testing.T) {
		now := w.clock.Now()
		secret, k := w.newKey(t, keyOpts{created: now, expires: now.Add(5 * time.Second)})
		got := wantOK(t, n.get(t, "/public/v1/key", secret))
		if !got.ExpiresAt.Equal(k.ExpiresAt) {
			t.Errorf("expires_at = %v, want %v", got.ExpiresAt, k.ExpiresAt)
		}
		// 6s is inside the cache TTL (10s): the cached record itself is judged.
		w.clock.Advance(6 * time.Second)
		wantError(t, n.get(t, "/public/v1/key", secret), 401, "unauthorized", "expired")
	})
}

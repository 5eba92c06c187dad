package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// pollUntil asks n for /key with secret until it answers status, and returns
// how long that took from start; it fails the test after limit, or on any
// answer that is neither status nor the one before the change (200, or for
// a wait for 200 the refusal before it).
func pollUntil(t *testing.T, n *node, secret string, status int, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	var before int
	for {
		a := n.get(t, "/public/v1/key", secret)
		if a.status == status {
			return time.Since(start)
		}
		if before == 0 {
			before = a.status
		}
		if a.status != before || (status != http.StatusOK && before != http.StatusOK) {
			t.Fatalf("status = %d while waiting for %d; body %s", a.status, status, a.body)
		}
		if time.Since(start) > limit {
			t.Fatalf("still %d after %v, want %d", a.status, limit, status)
		}
		time.Sleep(5 * time.Millisecond) // polling the answer; the time it takes is the measure
	}
}

// TestChangeNoticeReachesEveryNode: a revocation or access withdrawal,
// published as cmd/marketdata does, is seen by a second node sharing the
// services within 1 s (contract §2), though its cached entry would live 10 s.
func TestChangeNoticeReachesEveryNode(t *testing.T) {
	w := newWorld(t)
	n1 := w.node(t)
	n2 := w.node(t)

	t.Run("revoke", func(t *testing.T) {
		secret, k := w.newKey(t, keyOpts{})
		other, _ := w.key(t, k.AccountID, keyOpts{})
		for _, n := range []*node{n1, n2} {
			wantOK(t, n.get(t, "/public/v1/key", secret))
			wantOK(t, n.get(t, "/public/v1/key", other))
		}
		start := time.Now()
		w.revoke(t, k.ID)
		w.notify(t, k.AccountID, k.ID)
		if took := pollUntil(t, n2, secret, http.StatusUnauthorized, start, time.Second); took >= time.Second {
			t.Errorf("node 2 saw the revocation after %v, want < 1s", took)
		}
		if took := pollUntil(t, n1, secret, http.StatusUnauthorized, start, time.Second); took >= time.Second {
			t.Errorf("node 1 saw the revocation after %v, want < 1s", took)
		}
		wantError(t, n2.get(t, "/public/v1/key", secret), 401, "unauthorized", "revoked")
		// The account's other key keeps working.
		wantOK(t, n2.get(t, "/public/v1/key", other))
	})

	t.Run("withdraw access", func(t *testing.T) {
		secret, k := w.newKey(t, keyOpts{})
		other, _ := w.key(t, k.AccountID, keyOpts{})
		for _, n := range []*node{n1, n2} {
			wantOK(t, n.get(t, "/public/v1/key", secret))
			wantOK(t, n.get(t, "/public/v1/key", other))
		}
		start := time.Now()
		w.setAccess(t, k.AccountID, false)
		w.notify(t, k.AccountID, "") // as `access withdraw` sends it
		if took := pollUntil(t, n2, secret, http.StatusForbidden, start, time.Second); took >= time.Second {
			t.Errorf("node 2 saw the withdrawal after %v, want < 1s", took)
		}
		// Each node gets the notice in its own time (within the 1 s).
		if took := pollUntil(t, n1, secret, http.StatusForbidden, start, time.Second); took >= time.Second {
			t.Errorf("node 1 saw the withdrawal after %v, want < 1s", took)
		}
		// Every key of the account is refused, not only the one polled.
		wantError(t, n2.get(t, "/public/v1/key", other), 403, "access_not_granted", "access")
		wantError(t, n1.get(t, "/public/v1/key", secret), 403, "access_not_granted", "access")

		start = time.Now()
		w.setAccess(t, k.AccountID, true)
		w.notify(t, k.AccountID, "")
		if took := pollUntil(t, n2, secret, http.StatusOK, start, time.Second); took >= time.Second {
			t.Errorf("node 2 saw the grant after %v, want < 1s", took)
		}
	})

	t.Run("new key after it was refused as unknown", func(t *testing.T) {
		// An unknown secret is cached as unknown; the notice of the new key
		// drops that, so a key created right after works at once.
		secret := store.NewSecret()
		for _, n := range []*node{n1, n2} {
			wantError(t, n.get(t, "/public/v1/key", secret), 401, "unauthorized", "unknown")
		}
		start := time.Now()
		_, k := w.key(t, w.account(t, true), keyOpts{secret: secret})
		w.notify(t, k.AccountID, k.ID)
		if took := pollUntil(t, n2, secret, http.StatusOK, start, time.Second); took >= time.Second {
			t.Errorf("node 2 accepted the new key after %v, want < 1s", took)
		}
	})
}

// TestCacheTTLWithoutNotice: a node that never hears the notice still
// applies the change once its cached entry is older than KeyCacheTTL.
func TestCacheTTLWithoutNotice(t *testing.T) {
	const ttl = 300 * time.Millisecond
	w := newWorld(t)
	n := w.node(t, withKeyCacheTTL(ttl))

	t.Run("revoke", func(t *testing.T) {
		secret, k := w.newKey(t, keyOpts{})
		wantOK(t, n.get(t, "/public/v1/key", secret))
		start := time.Now()
		w.revoke(t, k.ID)
		took := pollUntil(t, n, secret, http.StatusUnauthorized, start, ttl+time.Second)
		t.Logf("revocation applied after %v without a notice", took)
	})

	t.Run("withdraw access", func(t *testing.T) {
		secret, k := w.newKey(t, keyOpts{})
		wantOK(t, n.get(t, "/public/v1/key", secret))
		start := time.Now()
		w.setAccess(t, k.AccountID, false)
		took := pollUntil(t, n, secret, http.StatusForbidden, start, ttl+time.Second)
		t.Logf("withdrawal applied after %v without a notice", took)
	})

	t.Run("cached until the TTL", func(t *testing.T) {
		// The injected clock stands still here, so the entry cannot age:
		// without a notice the revoked key is still served from the cache,
		// which shows the polls above were answered by the TTL, not a miss.
		secret, k := w.newKey(t, keyOpts{})
		wantOK(t, n.get(t, "/public/v1/key", secret))
		w.revoke(t, k.ID)
		w.clock.Advance(-time.Hour)
		defer w.clock.Advance(time.Hour)
		wantOK(t, n.get(t, "/public/v1/key", secret))
	})
}

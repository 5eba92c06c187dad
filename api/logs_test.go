package api_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/store"
)

// unreachableRedis is a client for an address nobody listens on; it does not
// retry, so each call fails at once and the per-node fallback decides.
func unreachableRedis(t *testing.T) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestRedisOutage: with Redis unreachable no answer is a 500 or 503; the
// per-node fallback keeps the window (with its headers) and the
// failed-authentication block.
func TestRedisOutage(t *testing.T) {
	w := newWorld(t)
	// An hour-long window: the fallback aligns windows on the clock, and a
	// boundary must not fall inside the test.
	n := w.node(t, withRedis(unreachableRedis(t)), withLimit(3), withWindow(time.Hour), withAuthFailLimit(2))
	secret, _ := w.newKey(t, keyOpts{})

	for i, remaining := range []string{"2", "1", "0"} {
		a := n.get(t, "/public/v1/key", secret)
		wantOK(t, a)
		wantLimitHeaders(t, a, true)
		if got := a.header.Get("RateLimit-Remaining"); got != remaining {
			t.Errorf("request %d: RateLimit-Remaining = %q, want %q", i+1, got, remaining)
		}
		if got := a.header.Get("RateLimit-Limit"); got != "3" {
			t.Errorf("request %d: RateLimit-Limit = %q, want 3", i+1, got)
		}
	}
	a := n.get(t, "/public/v1/key", secret)
	wantError(t, a, 429, "rate_limited", "limit")
	wantLimitHeaders(t, a, true)

	other, _ := w.newKey(t, keyOpts{})
	wantOK(t, n.get(t, "/public/v1/key", other))
	for range 2 {
		wantError(t, n.get(t, "/public/v1/key", store.NewSecret()), 401, "unauthorized", "unknown")
	}
	wantError(t, n.get(t, "/public/v1/key", other), 429, "rate_limited", "failed authentications")
	wantError(t, n.get(t, "/public/v1/key", ""), 429, "rate_limited", "failed authentications")

	if logs := n.logs.String(); !strings.Contains(logs, "alone") {
		t.Errorf("logs hold no warning that the node decided alone:\n%s", logs)
	}
}

// TestSecretsNeverLogged runs 200s, 401s, 403s, 404s, 429s, a Redis outage
// and a Postgres outage (503, logged with its error) and looks for every
// secret used, and for the secret prefix, in every node's log output.
func TestSecretsNeverLogged(t *testing.T) {
	w := newWorld(t)
	normal := w.node(t, withAuthFailLimit(50))
	outage := w.node(t, withRedis(unreachableRedis(t)), withAuthFailLimit(5))
	closed, err := store.Connect(t.Context(), w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	pgDown := w.node(t, withCredentials(store.New(closed)))

	var secrets []string
	use := func(s string) string { secrets = append(secrets, s); return s }
	valid, _ := w.newKey(t, keyOpts{})
	use(valid)
	revoked, rk := w.newKey(t, keyOpts{})
	use(revoked)
	w.revoke(t, rk.ID)
	now := w.clock.Now()
	expired, _ := w.newKey(t, keyOpts{created: now.Add(-time.Hour), expires: now.Add(-time.Minute)})
	use(expired)
	elsewhere, _ := w.newKey(t, keyOpts{allow: []string{"10.0.0.0/8"}})
	use(elsewhere)
	noAccess, nk := w.newKey(t, keyOpts{})
	use(noAccess)
	w.setAccess(t, nk.AccountID, false)
	malformed := use(valid[:len(valid)-1] + "!")
	short := use(valid[:len(valid)-1])

	for _, n := range []*node{normal, outage, pgDown} {
		for _, s := range []string{valid, revoked, expired, elsewhere, noAccess, use(store.NewSecret())} {
			n.get(t, "/public/v1/key", s)
			n.get(t, "/public/v1/key?api_key="+s, s)
			n.get(t, "/public/v1/nope?key="+s, s, "Origin", evilOrigin)
		}
		for _, h := range []string{"Bearer " + malformed, "Bearer " + short, "Basic " + valid, "bearer  " + valid + " extra", "Token " + valid} {
			a := n.do(t, http.MethodGet, "/public/v1/key", http.Header{"Authorization": {h}})
			if a.status/100 == 5 && a.status != http.StatusServiceUnavailable {
				t.Errorf("%s: status %d", h, a.status)
			}
		}
		for range 6 {
			n.get(t, "/public/v1/key", use(store.NewSecret())) // into the failed-auth block
		}
		n.get(t, "/public/v1/key", valid)
	}
	// The outage node never answered 5xx; the Postgres one answered 503.
	if a := outage.get(t, "/public/v1/key", valid, "X-Request-Id", "trace-0001-abc"); a.status != 429 {
		t.Errorf("outage node after the failures: status %d, want 429", a.status)
	}
	a := pgDown.get(t, "/public/v1/key", valid, "X-Request-Id", "trace-0002-abc")
	wantError(t, a, 503, "unavailable", "try again")

	for name, n := range map[string]*node{"normal": normal, "redis outage": outage, "postgres outage": pgDown} {
		logs := n.logs.String()
		if strings.Contains(logs, store.SecretPrefix) {
			t.Errorf("%s node: logs hold %q:\n%s", name, store.SecretPrefix, logs)
		}
		for _, s := range secrets {
			// The secret body without its prefix, and its hashable tail.
			if body := s[len(store.SecretPrefix):]; strings.Contains(logs, body[:20]) {
				t.Errorf("%s node: logs hold (part of) secret …%s", name, s[len(s)-4:])
			}
		}
	}
	if logs := outage.logs.String(); !strings.Contains(logs, "alone") {
		t.Errorf("redis outage node: no warning was logged; the check proves nothing:\n%s", logs)
	}
	if logs := pgDown.logs.String(); !strings.Contains(logs, "trace-0002-abc") || !strings.Contains(logs, "request failed") {
		t.Errorf("postgres outage node: the 503 was not logged with its request id:\n%s", logs)
	}
}

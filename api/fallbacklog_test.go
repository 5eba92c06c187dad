package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// TestRedisOutageWarnsRarely: with Redis unreachable every request is
// decided by the node alone, but the two "decided by this node alone" WARNs
// come at most once per 10 s each (the first at once), not once per request.
func TestRedisOutageWarnsRarely(t *testing.T) {
	e := newEnv(t)
	n := e.node(t, withRedis(unreachableRedis(t)), withLimit(1000), withWindow(time.Hour), withAuthFailLimit(1000))
	secret, _ := e.newKey(t, keyOpts{})
	start := time.Now()
	const requests = 40
	for range requests {
		wantOK(t, n.get(t, "/public/v1/key", secret))
		wantError(t, n.get(t, "/public/v1/key", store.NewSecret()), 401, "unauthorized", "unknown")
	}
	most := 1 + int(time.Since(start)/(10*time.Second))
	logs := n.logs.String()
	for _, msg := range []string{"limits decided by this node alone", "failed-auth limit decided by this node alone"} {
		got := 0
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, `"msg":"`+msg+`"`) {
				got++
				if !strings.Contains(l, `"suppressed":`) {
					t.Errorf("%q line without the suppressed count: %s", msg, l)
				}
			}
		}
		if got < 1 || got > most {
			t.Errorf("%q: got %d lines for %d requests, want 1..%d", msg, got, requests, most)
		}
	}
}

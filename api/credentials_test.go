package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/marketdata/marketdata/api"
)

// TestRevocationWithoutNoticeWithinASecond: with the NATS notice lost and
// the cache's 10 s TTL, a node still refuses a revoked key, and a withdrawn
// account, within 1 s: it polls the credentials version.
func TestRevocationWithoutNoticeWithinASecond(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := w.node(t, withKeyCacheTTL(10*time.Second), withSetup(func(s *api.Server) {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}))
	secret, k := w.newKey(t, keyOpts{})
	waitPollSaw(t, w, n)
	wantOK(t, n.get(t, "/public/v1/key", secret))
	wantOK(t, n.get(t, "/public/v1/key", secret)) // cached now
	start := time.Now()
	w.revoke(t, k.ID) // no notice
	took := pollUntil(t, n, secret, http.StatusUnauthorized, start, time.Second)
	t.Logf("revocation without a notice applied after %v", took)

	secret2, k2 := w.newKey(t, keyOpts{})
	waitPollSaw(t, w, n)
	wantOK(t, n.get(t, "/public/v1/key", secret2))
	wantOK(t, n.get(t, "/public/v1/key", secret2))
	start = time.Now()
	w.setAccess(t, k2.AccountID, false) // no notice
	took = pollUntil(t, n, secret2, http.StatusForbidden, start, time.Second)
	t.Logf("withdrawal without a notice applied after %v", took)
}

// waitPollSaw waits until n's credentials poll has read the store's current
// credentials version: from then on, any key or account change moves the
// version past what the node saw.
func waitPollSaw(t *testing.T, w *world, n *node) {
	t.Helper()
	want, err := w.st.CredentialsVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n.srv.CredentialsVersionSeen() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the node's credentials poll saw version %d after 5s, want %d", n.srv.CredentialsVersionSeen(), want)
		}
		time.Sleep(5 * time.Millisecond) // polling the credentials version the node saw
	}
}

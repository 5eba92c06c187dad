package api_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"sync/atomic"
	"testing"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/store"
)

// countingCredentials counts the key lookups that reach the store.
type countingCredentials struct {
	api.Credentials
	lookups atomic.Int64
}

func (c *countingCredentials) CredentialByHash(ctx context.Context, hash []byte) (*store.Credential, error) {
	c.lookups.Add(1)
	return c.Credentials.CredentialByHash(ctx, hash)
}

// TestMistypedKey: a key whose checksum does not match, or a key made
// before secrets carried one, is refused 401 with a message that says it
// was mistyped or truncated, without a key lookup, and counts as a failed
// authentication of the address like any other 401.
func TestMistypedKey(t *testing.T) {
	w := newWorld(t)
	creds := &countingCredentials{Credentials: w.st}
	n := w.node(t, withCredentials(creds), withTrusted("127.0.0.1/32"), withAuthFailLimit(3))
	from := func(addr string) []string { return []string{"X-Forwarded-For", addr} }

	valid, _ := w.newKey(t, keyOpts{})
	// A secret as NewSecret made them before the checksum: 43 random
	// base64url characters. Stored like any key, it is refused all the same.
	var b [32]byte
	rand.Read(b[:])
	legacy := store.SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	if store.ValidSecret(legacy) { // 1 in 2^32: its tail happens to be its checksum
		legacy = mistype(legacy, len(legacy)-1)
	}
	w.newKey(t, keyOpts{secret: legacy})

	const blocked = "198.51.100.7"
	wantError(t, n.get(t, "/public/v1/key", mistype(valid, 25), from(blocked)...), 401, "unauthorized", "mistyped or truncated")
	wantError(t, n.get(t, "/public/v1/key", legacy, from(blocked)...), 401, "unauthorized", "mistyped or truncated")
	wantError(t, n.get(t, "/public/v1/key", valid[:len(valid)-1], from(blocked)...), 401, "unauthorized", "truncated")
	if got := creds.lookups.Load(); got != 0 {
		t.Errorf("key lookups after three refused keys: %d, want 0", got)
	}
	// Three failed authentications reached the limit: the address is blocked.
	wantError(t, n.get(t, "/public/v1/key", valid, from(blocked)...), 429, "rate_limited", "failed authentications")

	// The counter sees lookups: the same valid key from elsewhere is looked up and served.
	wantOK(t, n.get(t, "/public/v1/key", valid, from("198.51.100.8")...))
	if got := creds.lookups.Load(); got == 0 {
		t.Error("key lookups after a served key: 0, want at least 1 (the counter counts nothing)")
	}
}

package api_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// Origins the nodes are configured with (docs, one app) and one they are not.
const (
	docsOrigin = "http://docs.example.test:8081"
	appOrigin  = "https://app.example.test"
	evilOrigin = "https://evil.example.test"
)

// keyOpts shape a key; zero values mean a plain 90-day key without allowlist.
type keyOpts struct {
	secret  string // "" = a fresh one
	scopes  []string
	allow   []string
	created time.Time
	expires time.Time
}

// account creates an account; granted gives it API access.
func (w *world) account(t testing.TB, granted bool) string {
	t.Helper()
	a, err := w.st.CreateAccount(t.Context(), "test "+t.Name(), w.clock.Now())
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	if granted {
		w.setAccess(t, a.ID, true)
	}
	return a.ID
}

func (w *world) setAccess(t testing.TB, accountID string, granted bool) {
	t.Helper()
	if _, err := w.st.SetAccess(t.Context(), accountID, granted, w.clock.Now()); err != nil {
		t.Fatalf("set access of %s: %v", accountID, err)
	}
}

// key creates a key for an account with access and returns its secret.
func (w *world) key(t testing.TB, accountID string, o keyOpts) (string, *store.Key) {
	t.Helper()
	if o.created.IsZero() {
		o.created = w.clock.Now()
	}
	if o.expires.IsZero() {
		o.expires = o.created.Add(90 * 24 * time.Hour)
	}
	if o.scopes == nil {
		o.scopes = []string{}
	}
	var cidrs []netip.Prefix
	for _, s := range o.allow {
		cidrs = append(cidrs, netip.MustParsePrefix(s))
	}
	secret := o.secret
	if secret == "" {
		secret = store.NewSecret()
	}
	k, err := w.st.CreateKey(t.Context(), store.NewKey{
		AccountID: accountID, SecretHash: store.HashSecret(w.pepper, secret), Last4: secret[len(secret)-4:],
		Scopes: o.scopes, IPAllowlist: cidrs, CreatedAt: o.created, ExpiresAt: o.expires,
	})
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	return secret, k
}

// newKey is a fresh account with access and one key shaped by o.
func (w *world) newKey(t testing.TB, o keyOpts) (secret string, k *store.Key) {
	t.Helper()
	return w.key(t, w.account(t, true), o)
}

func (w *world) revoke(t testing.TB, keyID string) {
	t.Helper()
	if _, err := w.st.RevokeKey(t.Context(), keyID, w.clock.Now()); err != nil {
		t.Fatalf("revoke %s: %v", keyID, err)
	}
}

// notify publishes a key notice exactly as cmd/marketdata's notifyKeys does.
func (w *world) notify(t testing.TB, accountID, keyID string) {
	t.Helper()
	if err := notice.Publish(w.nc, w.names.KeySubject, notice.Key{AccountID: accountID, KeyID: keyID}.Encode()); err != nil {
		t.Fatalf("publish key notice: %v", err)
	}
}

// mistype returns secret with its character at i replaced by another one of
// the secret alphabet: the shape holds, the checksum does not.
func mistype(secret string, i int) string {
	c := byte('A')
	if secret[i] == 'A' {
		c = 'B'
	}
	return secret[:i] + string(c) + secret[i+1:]
}

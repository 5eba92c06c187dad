package store_test

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/marketdata/marketdata/store"
)

// keysPepper is the HMAC key of the secrets of these tests.
var keysPepper = []byte("store-keys-test-pepper-0123456789abcdef")

// keysAccount creates an account, with access when granted.
func keysAccount(t *testing.T, s *store.Store, granted bool) *store.Account {
	t.Helper()
	a, err := s.CreateAccount(t.Context(), "keys test", t0)
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	if granted {
		if a, err = s.SetAccess(t.Context(), a.ID, true, t0); err != nil {
			t.Fatalf("SetAccess: %v", err)
		}
	}
	return a
}

// keysNew is a key creation for account with a fresh secret, created at
// created and living for life.
func keysNew(accountID string, created time.Time, life time.Duration) (store.NewKey, string) {
	secret := store.NewSecret()
	return store.NewKey{
		AccountID: accountID, SecretHash: store.HashSecret(keysPepper, secret), Last4: secret[len(secret)-4:],
		Scopes: []string{store.ScopeMarketsRead}, CreatedAt: created, ExpiresAt: created.Add(life),
	}, secret
}

// keysCreate creates an active key (created now, for a day) and returns it with its secret.
func keysCreate(t *testing.T, s *store.Store, accountID string) (*store.Key, string) {
	t.Helper()
	nk, secret := keysNew(accountID, time.Now(), 24*time.Hour)
	k, err := s.CreateKey(t.Context(), nk)
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	return k, secret
}

// TestCreateKeyConcurrentLimit: five creations started together for an
// account holding 3 active keys: exactly 2 succeed, 3 fail with
// ErrTooManyKeys, and the account ends with 5 active keys.
func TestCreateKeyConcurrentLimit(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	for round := range 5 {
		a := keysAccount(t, s, true)
		for range 3 {
			keysCreate(t, s, a.ID)
		}
		start := make(chan struct{})
		errs := make([]error, 5)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				nk, _ := keysNew(a.ID, time.Now(), 24*time.Hour)
				<-start
				_, errs[i] = s.CreateKey(t.Context(), nk)
			})
		}
		close(start)
		wg.Wait()
		ok, tooMany := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrTooManyKeys):
				tooMany++
			default:
				t.Errorf("round %d: unexpected error %v", round, err)
			}
		}
		var active int
		if err := pool.QueryRow(t.Context(), `
			SELECT count(*) FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL AND expires_at > now()`,
			a.ID).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if ok != 2 || tooMany != 3 || active != store.MaxActiveKeys {
			t.Errorf("round %d: got %d created, %d ErrTooManyKeys, %d active; want 2, 3, %d",
				round, ok, tooMany, active, store.MaxActiveKeys)
		}
	}
}

// TestCreateKeyCountsActiveOnly: revoked and expired keys do not count
// toward the 5 active keys.
func TestCreateKeyCountsActiveOnly(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	a := keysAccount(t, s, true)
	now := time.Now()
	// An expired key: created two hours ago for one hour.
	nk, _ := keysNew(a.ID, now.Add(-2*time.Hour), time.Hour)
	if _, err := s.CreateKey(t.Context(), nk); err != nil {
		t.Fatalf("expired key: %v", err)
	}
	revoked, _ := keysCreate(t, s, a.ID)
	if _, err := s.RevokeKey(t.Context(), revoked.ID, now); err != nil {
		t.Fatal(err)
	}
	for i := range store.MaxActiveKeys {
		nk, _ := keysNew(a.ID, time.Now(), time.Hour)
		if _, err := s.CreateKey(t.Context(), nk); err != nil {
			t.Fatalf("active key %d beside a revoked and an expired one: %v", i+1, err)
		}
	}
	nk, _ = keysNew(a.ID, time.Now(), time.Hour)
	if _, err := s.CreateKey(t.Context(), nk); !errors.Is(err, store.ErrTooManyKeys) {
		t.Fatalf("6th active key: got %v, want ErrTooManyKeys", err)
	}
	keys, err := s.Keys(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]int{}
	for _, k := range keys {
		status[k.Status(time.Now())]++
	}
	if want := map[string]int{"active": 5, "revoked": 1, "expired": 1}; fmt.Sprint(status) != fmt.Sprint(want) {
		t.Errorf("statuses: got %v, want %v", status, want)
	}
	if !slices.IsSortedFunc(keys, func(a, b store.Key) int { return strings.Compare(a.ID, b.ID) }) {
		t.Error("Keys: got them out of key_id order")
	}
}

func TestCreateKeyRefusals(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	noAccess := keysAccount(t, s, false)
	cases := []struct {
		name    string
		account string
		want    error
	}{
		{"account without access", noAccess.ID, store.ErrAccessNotGranted},
		{"unknown account", "acc_nope", store.ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nk, _ := keysNew(c.account, time.Now(), time.Hour)
			k, err := s.CreateKey(t.Context(), nk)
			if !errors.Is(err, c.want) || k != nil {
				t.Errorf("got %v, %v; want %v", k, err, c.want)
			}
		})
	}
	if keys, err := s.Keys(t.Context(), noAccess.ID); err != nil || len(keys) != 0 {
		t.Errorf("keys of the account without access: got %v, %v; want none", keys, err)
	}
}

// TestCreateKeyStoresNoSecret: the row holds the secret's keyed hash and
// last four characters, never the secret or its random part in any form;
// a second key with the same hash is refused.
func TestCreateKeyStoresNoSecret(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	a := keysAccount(t, s, true)
	created := time.Date(2025, 3, 14, 15, 9, 26, 535897123, cet)
	nk, secret := keysNew(a.ID, created, 90*24*time.Hour)
	nk.Scopes = []string{store.ScopeMarketsRead, store.ScopeStreamRead}
	nk.IPAllowlist = []netip.Prefix{netip.MustParsePrefix("10.1.2.3/8"), netip.MustParsePrefix("2001:db8::/32")}
	k, err := s.CreateKey(t.Context(), nk)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Key{
		ID: k.ID, AccountID: a.ID, Last4: secret[len(secret)-4:], Scopes: nk.Scopes,
		IPAllowlist: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")},
		CreatedAt:   created.UTC().Truncate(time.Microsecond), ExpiresAt: created.Add(90 * 24 * time.Hour).UTC().Truncate(time.Microsecond),
	}
	if !strings.HasPrefix(k.ID, "key_") || fmt.Sprint(*k) != fmt.Sprint(want) {
		t.Errorf("created key:\n got %+v\nwant %+v", *k, want)
	}

	// Every column of the row, as text.
	rows, err := pool.Query(t.Context(), `
		SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'api_keys'`)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, fmt.Sprintf("coalesce(%q::text, '')", c))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var row, hash string
	if err := pool.QueryRow(t.Context(), `
		SELECT concat_ws(' | ', `+strings.Join(cols, ", ")+`), encode(secret_hash, 'hex')
		FROM api_keys WHERE key_id = $1`, k.ID).Scan(&row, &hash); err != nil {
		t.Fatal(err)
	}
	body := strings.TrimPrefix(secret, store.SecretPrefix)
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{secret, body, body[:20], hex.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw)} {
		if strings.Contains(row, form) {
			t.Errorf("the api_keys row %q holds the secret (as %q)", row, form)
		}
	}
	if want := hex.EncodeToString(store.HashSecret(keysPepper, secret)); hash != want {
		t.Errorf("secret_hash: got %s, want HMAC-SHA256 %s", hash, want)
	}

	dup := nk
	dup.CreatedAt = time.Now()
	dup.ExpiresAt = dup.CreatedAt.Add(time.Hour)
	var pgErr *pgconn.PgError
	if _, err := s.CreateKey(t.Context(), dup); !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Errorf("a second key with the same secret_hash: got %v, want a unique violation", err)
	}
}

// TestRevokeKeyIdempotent: revoking again keeps the first revocation time.
func TestRevokeKeyIdempotent(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	a := keysAccount(t, s, true)
	k, _ := keysCreate(t, s, a.ID)
	first := time.Date(2026, 1, 2, 3, 4, 5, 6000, cet)
	got, err := s.RevokeKey(t.Context(), k.ID, first)
	if err != nil {
		t.Fatal(err)
	}
	if got.RevokedAt == nil || !got.RevokedAt.Equal(first) || got.RevokedAt.Location() != time.UTC || got.Status(time.Now()) != "revoked" {
		t.Fatalf("first revocation: got revoked_at %v, status %s; want %v in UTC, revoked", got.RevokedAt, got.Status(time.Now()), first.UTC())
	}
	again, err := s.RevokeKey(t.Context(), k.ID, first.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again.RevokedAt == nil || !again.RevokedAt.Equal(first) {
		t.Errorf("second revocation: got revoked_at %v, want the first %v", again.RevokedAt, first.UTC())
	}
	if _, err := s.RevokeKey(t.Context(), "key_nope", first); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: got %v, want ErrNotFound", err)
	}
}

// TestCredentialByHash: the secret's hash finds the key with its account;
// an unknown hash is ErrNotFound.
func TestCredentialByHash(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	a := keysAccount(t, s, true)
	k, secret := keysCreate(t, s, a.ID)
	keysCreate(t, s, a.ID) // a neighbour that must not be found instead
	cred, err := s.CredentialByHash(t.Context(), store.HashSecret(keysPepper, secret))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cred.Key) != fmt.Sprint(*k) {
		t.Errorf("key:\n got %+v\nwant %+v", cred.Key, *k)
	}
	if fmt.Sprint(cred.Account) != fmt.Sprint(*a) {
		t.Errorf("account:\n got %+v\nwant %+v", cred.Account, *a)
	}
	for name, hash := range map[string][]byte{
		"another secret":    store.HashSecret(keysPepper, store.NewSecret()),
		"another pepper":    store.HashSecret([]byte("another-pepper-0123456789abcdef01"), secret),
		"the secret itself": []byte(secret),
	} {
		if cred, err := s.CredentialByHash(t.Context(), hash); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: got %v, %v; want ErrNotFound", name, cred, err)
		}
	}
}

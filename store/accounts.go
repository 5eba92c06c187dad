package store

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Errors callers branch on.
var (
	ErrNotFound         = errors.New("not found")
	ErrAccessNotGranted = errors.New("access_not_granted: the account has no granted API access")
	ErrTooManyKeys      = errors.New("the account already has 5 active keys; revoke one first")
)

// MaxActiveKeys is how many unrevoked, unexpired keys an account may hold.
const MaxActiveKeys = 5

// HashSecret is the keyed hash under which a secret is stored and looked up.
func HashSecret(pepper []byte, secret string) []byte {
	m := hmac.New(sha256.New, pepper)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// Hasher computes HashSecret for one pepper, reusing its HMAC state: it runs
// on every API request. Safe for concurrent use.
type Hasher struct {
	pool sync.Pool
}

// NewHasher returns a Hasher for pepper.
func NewHasher(pepper []byte) *Hasher {
	p := slices.Clone(pepper)
	return &Hasher{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, p) }}}
}

// Hash is HashSecret(pepper, secret), appended to dst.
func (h *Hasher) Hash(dst []byte, secret string) []byte {
	m := h.pool.Get().(hash.Hash)
	m.Reset()
	io.WriteString(m, secret) //nolint:errcheck // a hash.Hash never returns a write error (its doc says so)
	dst = m.Sum(dst)
	h.pool.Put(m)
	return dst
}

func newID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Account is a customer account.
type Account struct {
	ID              string
	Name            string
	AccessGranted   bool
	AccessChangedAt *time.Time
	CreatedAt       time.Time
}

// Key is an API key record; the secret itself is never stored.
type Key struct {
	ID          string
	AccountID   string
	Last4       string
	Scopes      []string
	IPAllowlist []netip.Prefix
	CreatedAt   time.Time
	ExpiresAt   time.Time
	RevokedAt   *time.Time
}

// Status is "revoked", "expired" or "active" at now.
func (k *Key) Status(now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return KeyRevoked
	case !now.Before(k.ExpiresAt):
		return KeyExpired
	default:
		return KeyActive
	}
}

// CreateAccount creates an account without access.
func (s *Store) CreateAccount(ctx context.Context, name string, now time.Time) (*Account, error) {
	a := &Account{ID: newID("acc_"), Name: name, CreatedAt: now.UTC().Truncate(time.Microsecond)}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO accounts (account_id, name, created_at)
		VALUES ($1, $2, $3)`, a.ID, a.Name, a.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("store: create account: %w", err)
	}
	return a, nil
}

const accountColumns = `account_id, name, access_granted, access_changed_at, created_at`

func scanAccount(row pgx.Row) (*Account, error) {
	var a Account
	if err := row.Scan(&a.ID, &a.Name, &a.AccessGranted, &a.AccessChangedAt, &a.CreatedAt); err != nil {
		return nil, err
	}
	a.CreatedAt = a.CreatedAt.UTC()
	if a.AccessChangedAt != nil {
		t := a.AccessChangedAt.UTC()
		a.AccessChangedAt = &t
	}
	return &a, nil
}

// SetAccess grants or withdraws an account's API access.
func (s *Store) SetAccess(ctx context.Context, accountID string, granted bool, now time.Time) (*Account, error) {
	a, err := scanAccount(s.pool.QueryRow(ctx, `
		UPDATE accounts
		SET access_granted = $2,
		    access_changed_at = CASE WHEN access_granted = $2 THEN access_changed_at ELSE $3 END
		WHERE account_id = $1
		RETURNING `+accountColumns, accountID, granted, now.UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: account %s: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: set access of %s: %w", accountID, err)
	}
	return a, nil
}

// Account reads one account.
func (s *Store) Account(ctx context.Context, accountID string) (*Account, error) {
	a, err := scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountColumns+` FROM accounts WHERE account_id = $1`, accountID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: account %s: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read account %s: %w", accountID, err)
	}
	return a, nil
}

// Scopes a key may carry.
const (
	ScopeMarketsRead = "markets:read"
	ScopeAccountRead = "account:read"
	ScopeStreamRead  = "stream:read"
	// ScopeTrade is reserved: refused at creation.
	ScopeTrade = "trade"
)

// KnownScopes are the scopes a key may be created with.
var KnownScopes = []string{ScopeMarketsRead, ScopeAccountRead, ScopeStreamRead}

// Key limits and defaults of the contract.
const (
	MaxAllowlist   = 20
	MaxKeyLifetime = 365 * 24 * time.Hour
	// DefaultKeyLifetime is a new key's lifetime unless its creator says
	// otherwise (`key create --expires-in`).
	DefaultKeyLifetime = 90 * 24 * time.Hour
)

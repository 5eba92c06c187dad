package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// NewKey is what key creation needs; the caller has validated scopes,
// allowlist size and lifetime.
type NewKey struct {
	AccountID   string
	SecretHash  []byte
	Last4       string
	Scopes      []string
	IPAllowlist []netip.Prefix
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

const keyColumns = `k.key_id, k.account_id, k.last4, k.scopes, k.ip_allowlist, k.created_at, k.expires_at, k.revoked_at`

func scanKey(row pgx.Row, extra ...any) (*Key, error) {
	var k Key
	var cidrs []string
	dest := append([]any{&k.ID, &k.AccountID, &k.Last4, &k.Scopes, &cidrs, &k.CreatedAt, &k.ExpiresAt, &k.RevokedAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	k.CreatedAt, k.ExpiresAt = k.CreatedAt.UTC(), k.ExpiresAt.UTC()
	if k.RevokedAt != nil {
		t := k.RevokedAt.UTC()
		k.RevokedAt = &t
	}
	k.IPAllowlist = make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("stored allowlist entry %q: %w", c, err)
		}
		k.IPAllowlist = append(k.IPAllowlist, p)
	}
	return &k, nil
}

// CreateKey creates a key for an account that has access and fewer than
// MaxActiveKeys active keys. The account row is locked for the check and the
// insert, so concurrent creations can never make one key too many.
func (s *Store) CreateKey(ctx context.Context, nk NewKey) (*Key, error) {
	var key *Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var granted bool
		err := tx.QueryRow(ctx, `
			SELECT access_granted FROM accounts WHERE account_id = $1 FOR UPDATE`, nk.AccountID).Scan(&granted)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("account %s: %w", nk.AccountID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if !granted {
			return ErrAccessNotGranted
		}
		var active int
		if err := tx.QueryRow(ctx, `
			SELECT count(*) FROM api_keys
			WHERE account_id = $1 AND revoked_at IS NULL AND expires_at > $2`,
			nk.AccountID, nk.CreatedAt).Scan(&active); err != nil {
			return err
		}
		if active >= MaxActiveKeys {
			return ErrTooManyKeys
		}
		cidrs := make([]string, len(nk.IPAllowlist))
		for i, p := range nk.IPAllowlist {
			cidrs[i] = p.Masked().String()
		}
		key, err = scanKey(tx.QueryRow(ctx, `
			INSERT INTO api_keys AS k (key_id, account_id, secret_hash, last4, scopes, ip_allowlist, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			RETURNING `+keyColumns,
			newID("key_"), nk.AccountID, nk.SecretHash, nk.Last4, nk.Scopes, cidrs,
			nk.CreatedAt.UTC().Truncate(time.Microsecond), nk.ExpiresAt.UTC().Truncate(time.Microsecond)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: create key: %w", err)
	}
	return key, nil
}

// RevokeKey revokes a key; revoking it again keeps the first revocation time.
func (s *Store) RevokeKey(ctx context.Context, keyID string, now time.Time) (*Key, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `
		UPDATE api_keys AS k
		SET revoked_at = COALESCE(k.revoked_at, $2)
		WHERE k.key_id = $1
		RETURNING `+keyColumns, keyID, now.UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: key %s: %w", keyID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: revoke key %s: %w", keyID, err)
	}
	return k, nil
}

// Keys lists an account's keys, ascending by id.
func (s *Store) Keys(ctx context.Context, accountID string) ([]Key, error) {
	if _, err := s.Account(ctx, accountID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+keyColumns+`
		FROM api_keys k
		WHERE k.account_id = $1
		ORDER BY k.key_id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("store: list keys of %s: %w", accountID, err)
	}
	keys, err := collectKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("store: list keys of %s: %w", accountID, err)
	}
	return keys, nil
}

// Credential is a key with its account, what authentication needs.
type Credential struct {
	Key     Key
	Account Account
}

// CredentialByHash finds the key whose secret hashes to hash, with its
// account. ErrNotFound when no key has that hash.
func (s *Store) CredentialByHash(ctx context.Context, hash []byte) (*Credential, error) {
	var a Account
	k, err := scanKey(s.pool.QueryRow(ctx, `
		SELECT `+keyColumns+`, a.account_id, a.name, a.access_granted, a.access_changed_at, a.created_at
		FROM api_keys k
		JOIN accounts a ON a.account_id = k.account_id
		WHERE k.secret_hash = $1`, hash),
		&a.ID, &a.Name, &a.AccessGranted, &a.AccessChangedAt, &a.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: look up key: %w", err)
	}
	a.CreatedAt = a.CreatedAt.UTC()
	if a.AccessChangedAt != nil {
		t := a.AccessChangedAt.UTC()
		a.AccessChangedAt = &t
	}
	return &Credential{Key: *k, Account: a}, nil
}

// CredentialsVersion moves with every change to keys and accounts; API
// nodes poll it to drop their key cache when a notice was lost.
func (s *Store) CredentialsVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.pool.QueryRow(ctx, `SELECT version FROM credentials_version WHERE id = 1`).Scan(&v); err != nil {
		return 0, fmt.Errorf("store: read credentials version: %w", err)
	}
	return v, nil
}

// Key states, as Key.Status names them and /account/keys filters by them.
const (
	KeyActive  = "active"
	KeyRevoked = "revoked"
	KeyExpired = "expired"
)

// KeyStates are the states a key can be in.
var KeyStates = []string{KeyActive, KeyRevoked, KeyExpired}

// AccountKeys is one page of an account's keys: those in state status at now
// ("" = every state), with ids above after ("" = from the first), ascending
// by id (bytewise: key_id is COLLATE "C"), at most limit. Called on the
// primary (as API nodes do), it lists a key committed a moment ago by any
// node, which a lagging replica might not. States are judged at the caller's
// now, as Key.Status does: a key past expires_at lists as expired.
func (s *Store) AccountKeys(ctx context.Context, accountID, status, after string, limit int, now time.Time) ([]Key, error) {
	if status != "" && !slices.Contains(KeyStates, status) {
		return nil, fmt.Errorf("store: list keys of %s: unknown key state %q", accountID, status)
	}
	// The CASE is Key.Status in SQL: revoked wins over expired.
	rows, err := s.pool.Query(ctx, `
		SELECT `+keyColumns+`
		FROM api_keys k
		WHERE k.account_id = $1 AND k.key_id > $2
		  AND ($4::text = '' OR $4::text = CASE
		        WHEN k.revoked_at IS NOT NULL THEN 'revoked'
		        WHEN k.expires_at <= $5 THEN 'expired'
		        ELSE 'active' END)
		ORDER BY k.key_id
		LIMIT $3`, accountID, after, limit, status, now.UTC())
	if err != nil {
		return nil, fmt.Errorf("store: list keys of %s after %q: %w", accountID, after, err)
	}
	keys, err := collectKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("store: list keys of %s after %q: %w", accountID, after, err)
	}
	return keys, nil
}

// KeyFields are a key's fields as every JSON view of it shows them (GET
// /public/v1/key, GET /public/v1/account/keys, `marketdata key` --json),
// never its secret or hash. The views embed it, so they cannot drift apart.
type KeyFields struct {
	KeyID       string    `json:"key_id"`
	AccountID   string    `json:"account_id"`
	Last4       string    `json:"last4"`
	Scopes      []string  `json:"scopes"`
	IPAllowlist []string  `json:"ip_allowlist"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// FieldsOf is k's KeyFields: times in UTC, lists never null.
func FieldsOf(k *Key) KeyFields {
	cidrs := make([]string, len(k.IPAllowlist))
	for i, p := range k.IPAllowlist {
		cidrs[i] = p.String()
	}
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return KeyFields{
		KeyID: k.ID, AccountID: k.AccountID, Last4: k.Last4, Scopes: scopes, IPAllowlist: cidrs,
		CreatedAt: k.CreatedAt.UTC(), ExpiresAt: k.ExpiresAt.UTC(),
	}
}

// KeyRecord is a key as users list it: the record `marketdata key list
// --json` prints and GET /public/v1/account/keys answers.
type KeyRecord struct {
	KeyFields
	RevokedAt *time.Time `json:"revoked_at"`
	Status    string     `json:"status"`
}

// RecordOf is k's KeyRecord, its status judged at now.
func RecordOf(k *Key, now time.Time) KeyRecord {
	var revoked *time.Time
	if k.RevokedAt != nil {
		r := k.RevokedAt.UTC()
		revoked = &r
	}
	return KeyRecord{KeyFields: FieldsOf(k), RevokedAt: revoked, Status: k.Status(now)}
}

// collectKeys reads every row of a key listing.
func collectKeys(rows pgx.Rows) ([]Key, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) {
		k, err := scanKey(r)
		if err != nil {
			return Key{}, err
		}
		return *k, nil
	})
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/marketdata/marketdata/store"
)

// The state `marketdata dev` keeps between runs (contract §1): the cursor
// secret and key pepper it made, and the demo account and key, so the key it
// printed (and the curl line with it) keeps working after a restart.
//
// The file holds the demo key's secret in plain: dev prints it at every start,
// so it must be kept somewhere, and the file is the developer's own (mode
// 0600 in a 0700 directory), like a CLI's credentials file. The database
// still stores only the key's hash. Nothing but dev reads the file.

// devStateVersion is the layout of the file; another version is refused with
// a pointer to --reset rather than misread.
const devStateVersion = 1

// devState is the file's content.
type devState struct {
	Version int `json:"version"`
	// Database is the database the demo account lives in, without its
	// password: a state made for another database is not reused.
	Database     string    `json:"database"`
	CursorSecret string    `json:"cursor_secret"`
	KeyPepper    string    `json:"key_pepper"`
	AccountID    string    `json:"account_id,omitempty"`
	KeyID        string    `json:"key_id,omitempty"`
	Secret       string    `json:"demo_key,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

// defaultDevStatePath is $XDG_STATE_HOME/marketdata/dev.json, else
// ~/.local/state/marketdata/dev.json (the XDG base directory default), else
// "": a shared place such as /tmp is never a default, since anyone who can
// write there could hand dev a pepper of their choosing.
func defaultDevStatePath(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "marketdata", "dev.json")
	}
	if home := getenv("HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".local", "state", "marketdata", "dev.json")
	}
	return ""
}

// loadDevState reads the state at path; a missing file is a zero state. A
// file that is not a regular file of the caller's, readable by its owner
// only, is refused: its secrets would not be dev's own.
func loadDevState(path string) (*devState, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return &devState{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dev state %s: %w", path, err)
	}
	if err := checkPrivate(path, fi); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dev state %s: %w", path, err)
	}
	var st devState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("dev state %s is not valid JSON (%v); `marketdata dev --reset` starts over", path, err)
	}
	if st.Version != devStateVersion {
		return nil, fmt.Errorf("dev state %s has version %d, this marketdata writes %d; `marketdata dev --reset` starts over",
			path, st.Version, devStateVersion)
	}
	return &st, nil
}

// save writes the state atomically (a reader sees the old file or the new
// one), readable by its owner only.
func (st *devState) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("dev state: %w", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("dev state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".dev-*.json")
	if err != nil {
		return fmt.Errorf("dev state: %w", err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename; removes a failed write's file
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close() //nolint:errcheck // the chmod's error is the one reported
		return fmt.Errorf("dev state: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close() //nolint:errcheck // the write's error is the one reported
		return fmt.Errorf("dev state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("dev state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("dev state: %w", err)
	}
	return nil
}

// redactedDSN is the database URL without its password, the state's record
// of which database the demo account is in.
func redactedDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "unparsable database URL"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	return u.String()
}

// randomSecret is 32 random bytes in hex: a cursor secret or pepper.
func randomSecret() string {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// devSession is what dev starts with: its configuration, the demo key's
// secret, and whether that key was made on this start.
type devSession struct {
	cfg       *Config
	secret    string
	keyID     string
	statePath string
	newKey    bool
}

// prepareDev loads (or, with reset or none, makes) dev's state, loads the
// configuration with the state's secrets where the environment sets none,
// migrates the database and makes sure the demo key works: the kept one if
// its account still has access and it is neither revoked nor close to expiry,
// else a new one (the old demo key revoked, so restarts never pile up keys).
// The state file is written before prepareDev returns.
func prepareDev(ctx context.Context, getenv func(string) string, path string, reset bool, now time.Time) (*devSession, error) {
	if path == "" {
		return nil, errors.New("dev state: neither XDG_STATE_HOME nor HOME is set: name the state file with --state")
	}
	st, err := loadDevState(path)
	if err != nil && !reset {
		return nil, err
	}
	var revoke *devState // with --reset, the demo key the old state kept
	if reset {
		if err == nil && st.KeyID != "" {
			revoke = st
		}
		st = &devState{}
	}
	if st.Version == 0 {
		st = &devState{Version: devStateVersion, CursorSecret: randomSecret(), KeyPepper: randomSecret(), CreatedAt: now.UTC()}
	}
	// The environment wins over the state; the state keeps only what dev made.
	env := func(name string) string {
		if v := getenv(name); v != "" {
			return v
		}
		switch name {
		case "MD_CURSOR_SECRET":
			return st.CursorSecret
		case "MD_KEY_PEPPER":
			return st.KeyPepper
		}
		return ""
	}
	cfg, err := LoadConfig(env, secretsRequired)
	if err != nil {
		return nil, err
	}
	if db := redactedDSN(cfg.DatabaseURL); st.Database != db {
		// Another database: the kept account is not there.
		st.Database, st.AccountID, st.KeyID, st.Secret = db, "", "", ""
	}
	if _, err := store.Migrate(ctx, cfg.DatabaseURL); err != nil {
		return nil, err
	}
	s, closeStore, err := openStore(ctx, "MD_DATABASE_URL", cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	sess := &devSession{cfg: cfg, statePath: path}
	if revoke != nil && revoke.Database == st.Database {
		// Starting over means the old demo key stops working, whatever pepper
		// is in use (one set in the environment would keep it valid).
		if _, err := s.RevokeKey(ctx, revoke.KeyID, now); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	if ok, err := demoKeyWorks(ctx, s, cfg.KeyPepper, st, now); err != nil {
		return nil, err
	} else if !ok {
		if err := newDemoKey(ctx, s, cfg.KeyPepper, st, now); err != nil {
			return nil, err
		}
		sess.newKey = true
	}
	if err := st.save(path); err != nil {
		return nil, err
	}
	sess.secret, sess.keyID = st.Secret, st.KeyID
	return sess, nil
}

// demoKeyRenewBefore: a kept demo key this close to its expiry is replaced at
// start, so a dev session never loses its key midway.
const demoKeyRenewBefore = 7 * 24 * time.Hour

// demoKeyWorks tells whether the kept demo key authenticates under pepper
// with access granted and every scope, for at least demoKeyRenewBefore more.
func demoKeyWorks(ctx context.Context, s *store.Store, pepper []byte, st *devState, now time.Time) (bool, error) {
	if st.Secret == "" {
		return false, nil
	}
	cred, err := s.CredentialByHash(ctx, store.HashSecret(pepper, st.Secret))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	k := cred.Key
	return k.ID == st.KeyID && k.RevokedAt == nil && k.ExpiresAt.After(now.Add(demoKeyRenewBefore)) &&
		cred.Account.AccessGranted && len(k.Scopes) == len(store.KnownScopes), nil
}

// newDemoKey makes a demo key with every scope in the kept demo account (made
// first if there is none), with access granted, and records it in st. The
// kept key, if any, is revoked first: it no longer works for dev, and an
// account has at most 5 active keys.
func newDemoKey(ctx context.Context, s *store.Store, pepper []byte, st *devState, now time.Time) error {
	if st.AccountID != "" {
		if _, err := s.Account(ctx, st.AccountID); errors.Is(err, store.ErrNotFound) {
			st.AccountID = ""
		} else if err != nil {
			return err
		}
	}
	if st.AccountID == "" {
		a, err := s.CreateAccount(ctx, "demo", now)
		if err != nil {
			return err
		}
		st.AccountID, st.KeyID = a.ID, ""
	}
	if _, err := s.SetAccess(ctx, st.AccountID, true, now); err != nil {
		return err
	}
	if st.KeyID != "" {
		if _, err := s.RevokeKey(ctx, st.KeyID, now); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	secret := store.NewSecret()
	k, err := s.CreateKey(ctx, store.NewKey{
		AccountID: st.AccountID, SecretHash: store.HashSecret(pepper, secret), Last4: secret[len(secret)-4:],
		Scopes: store.KnownScopes, CreatedAt: now, ExpiresAt: now.Add(store.DefaultKeyLifetime),
	})
	if err != nil {
		return err
	}
	st.KeyID, st.Secret = k.ID, secret
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// devEnv is the environment of a dev run on the test's own database and
// Redis prefix.
func devEnv(t *testing.T) map[string]string {
	t.Helper()
	_, prefix := testenv.Redis(t)
	return map[string]string{
		"MD_DATABASE_URL": testenv.Database(t),
		"MD_REDIS_URL":    testenv.RedisURL,
		"MD_REDIS_PREFIX": prefix,
		"MD_NATS_URL":     testenv.NATSURL,
	}
}

// credential looks the secret up as an API node would, under cfg's pepper.
func credential(t *testing.T, cfg *Config, secret string) *store.Credential {
	t.Helper()
	ctx := context.Background()
	s, closeStore, err := openStore(ctx, "MD_DATABASE_URL", cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	cred, err := s.CredentialByHash(ctx, store.HashSecret(cfg.KeyPepper, secret))
	if err != nil {
		t.Fatalf("the demo key does not authenticate: %v", err)
	}
	return cred
}

func TestDevStateKeepsTheDemoKey(t *testing.T) {
	env := devEnv(t)
	path := filepath.Join(t.TempDir(), "state", "dev.json")
	ctx := context.Background()
	now := time.Now()

	first, err := prepareDev(ctx, envOf(env), path, false, now)
	if err != nil {
		t.Fatal(err)
	}
	if !first.newKey || store.CheckSecret(first.secret) != nil {
		t.Fatalf("first start: newKey %v, secret %q; want a new well-formed key", first.newKey, first.secret)
	}
	cred := credential(t, first.cfg, first.secret)
	if !cred.Account.AccessGranted || len(cred.Key.Scopes) != len(store.KnownScopes) {
		t.Errorf("demo key: access %v, scopes %v; want access and every scope", cred.Account.AccessGranted, cred.Key.Scopes)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600 (it holds the demo key and dev's secrets)", fi.Mode().Perm())
	}

	// A restart: the same key, secrets and account.
	second, err := prepareDev(ctx, envOf(env), path, false, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if second.newKey || second.secret != first.secret || second.keyID != first.keyID {
		t.Errorf("restart: newKey %v, key %s; want the kept key %s", second.newKey, second.keyID, first.keyID)
	}
	if string(second.cfg.KeyPepper) != string(first.cfg.KeyPepper) || string(second.cfg.CursorSecret) != string(first.cfg.CursorSecret) {
		t.Error("restart: the pepper or cursor secret changed; cursors and the key would stop working")
	}
	if string(second.cfg.KeyPepper) == string(second.cfg.CursorSecret) {
		t.Error("the pepper and the cursor secret are the same value")
	}

	// The kept key revoked (say with `marketdata key revoke`): a new one in
	// the same account, and no active key left behind.
	s, closeStore, err := openStore(ctx, "MD_DATABASE_URL", first.cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	if _, err := s.RevokeKey(ctx, first.keyID, now); err != nil {
		t.Fatal(err)
	}
	third, err := prepareDev(ctx, envOf(env), path, false, now.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !third.newKey || third.secret == first.secret {
		t.Fatalf("after revocation: newKey %v; want a new key", third.newKey)
	}
	if c := credential(t, third.cfg, third.secret); c.Account.ID != cred.Account.ID {
		t.Errorf("new key in account %s, want the demo account %s", c.Account.ID, cred.Account.ID)
	}

	// Access withdrawn and the key near its expiry: granted again, renewed,
	// the old key revoked (an account has at most 5 active keys).
	if _, err := s.SetAccess(ctx, cred.Account.ID, false, now); err != nil {
		t.Fatal(err)
	}
	late := now.Add(store.DefaultKeyLifetime - 24*time.Hour)
	fourth, err := prepareDev(ctx, envOf(env), path, false, late)
	if err != nil {
		t.Fatal(err)
	}
	if !fourth.newKey || !credential(t, fourth.cfg, fourth.secret).Account.AccessGranted {
		t.Errorf("access withdrawn, key expiring: newKey %v; want a new key with access", fourth.newKey)
	}
	keys, err := s.Keys(ctx, cred.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	for _, k := range keys {
		if k.RevokedAt == nil {
			active++
		}
	}
	if len(keys) != 3 || active != 1 {
		t.Errorf("demo account has %d keys, %d active; want 3 and 1", len(keys), active)
	}

	// --reset: everything new.
	fifth, err := prepareDev(ctx, envOf(env), path, true, now)
	if err != nil {
		t.Fatal(err)
	}
	if fifth.secret == fourth.secret || string(fifth.cfg.KeyPepper) == string(fourth.cfg.KeyPepper) ||
		string(fifth.cfg.CursorSecret) == string(fourth.cfg.CursorSecret) {
		t.Error("--reset kept the key, the pepper or the cursor secret")
	}
	if c := credential(t, fifth.cfg, fifth.secret); c.Account.ID == cred.Account.ID {
		t.Error("--reset reused the old demo account")
	}
}

func TestDevStateEnvironmentWins(t *testing.T) {
	env := devEnv(t)
	env["MD_KEY_PEPPER"] = "operator-pepper-0123456789abcdef0123456789"
	path := filepath.Join(t.TempDir(), "dev.json")
	sess, err := prepareDev(context.Background(), envOf(env), path, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if string(sess.cfg.KeyPepper) != env["MD_KEY_PEPPER"] {
		t.Error("MD_KEY_PEPPER set: dev used another pepper")
	}
	credential(t, sess.cfg, sess.secret)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), env["MD_KEY_PEPPER"]) {
		t.Error("the state file holds the pepper the environment gave; it keeps only what dev made")
	}
}

// TestDevResetRevokesTheOldKey: with the pepper set in the environment, the
// old demo key would still authenticate after --reset unless it is revoked.
func TestDevResetRevokesTheOldKey(t *testing.T) {
	env := devEnv(t)
	env["MD_KEY_PEPPER"] = "operator-pepper-0123456789abcdef0123456789"
	path := filepath.Join(t.TempDir(), "dev.json")
	ctx := context.Background()
	old, err := prepareDev(ctx, envOf(env), path, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := prepareDev(ctx, envOf(env), path, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if fresh.secret == old.secret {
		t.Fatal("--reset kept the demo key")
	}
	if c := credential(t, old.cfg, old.secret); c.Key.RevokedAt == nil {
		t.Error("--reset left the old demo key active: it still authenticates under the environment's pepper")
	}
}

func TestDevStateRefusesAFileNotPrivate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	st := &devState{Version: devStateVersion, KeyPepper: randomSecret(), CursorSecret: randomSecret()}
	if err := st.save(good); err != nil {
		t.Fatal(err)
	}
	if _, err := loadDevState(good); err != nil {
		t.Fatalf("the file dev wrote: %v", err)
	}
	open := filepath.Join(dir, "open.json")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(open, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{open, link} {
		if _, err := prepareDev(context.Background(), envOf(nil), path, false, time.Now()); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v; want a refusal naming the file", filepath.Base(path), err)
		}
	}
	if _, err := prepareDev(context.Background(), envOf(nil), defaultDevStatePath(envOf(nil)), false, time.Now()); err == nil ||
		!strings.Contains(err.Error(), "--state") {
		t.Errorf("no HOME nor XDG_STATE_HOME: got %v; want a refusal asking for --state", err)
	}
}

func TestDevStateOtherDatabase(t *testing.T) {
	env := devEnv(t)
	path := filepath.Join(t.TempDir(), "dev.json")
	ctx := context.Background()
	first, err := prepareDev(ctx, envOf(env), path, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	env["MD_DATABASE_URL"] = testenv.Database(t)
	second, err := prepareDev(ctx, envOf(env), path, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !second.newKey || second.secret == first.secret {
		t.Fatal("another database: want a new demo key there")
	}
	credential(t, second.cfg, second.secret)
}

func TestDevStateRefusesWhatItCannotRead(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"garbage":     "{not json",
		"new-version": `{"version": 99, "key_pepper": "x"}`,
	} {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		// Refused before any service is dialled: no environment needed.
		_, err := prepareDev(context.Background(), envOf(nil), path, false, time.Now())
		if err == nil || !strings.Contains(err.Error(), "--reset") || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v; want a refusal naming the file and --reset", name, err)
		}
	}
}

// TestDevRestartKeepsTheCurlLineWorking runs `marketdata dev` twice, as a
// user would (Ctrl-C in between): the key and curl line the first run printed
// answer 200 on the second.
func TestDevRestartKeepsTheCurlLineWorking(t *testing.T) {
	env := devEnv(t)
	_, names := testenv.NATS(t)
	env["MD_HTTP_ADDR"], env["MD_ADMIN_ADDR"] = "127.0.0.1:0", "127.0.0.1:0"
	env["MD_DOCS_ADDR"] = "127.0.0.1:0"
	path := filepath.Join(t.TempDir(), "dev.json")
	args := []string{"dev", "--state", path, "--events", "3", "--rate", "5", "--log-level", "warn",
		"--stream", names.Stream, "--subject-prefix", names.SubjectPrefix, "--dlq-stream", names.DLQStream,
		"--dlq-prefix", names.DLQPrefix, "--notice-subject", names.NoticeSubject}
	curl := regexp.MustCompile(`curl -s -H 'Authorization: Bearer (mdk_live_[A-Za-z0-9_-]{43})' (http://[0-9.:]+/public/v1/key)`)

	run := func() (key, url string) {
		t.Helper()
		out, logs := &testenv.LogBuffer{}, &testenv.LogBuffer{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			root := newRoot(envOf(env), out, logs)
			root.SetArgs(args)
			done <- root.ExecuteContext(ctx)
		}()
		exited := false
		defer func() {
			cancel()
			if exited {
				return
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("dev exited with %v; logs:\n%s", err, logs.String())
				}
			case <-time.After(30 * time.Second):
				t.Error("dev did not stop 30 s after Ctrl-C")
			}
		}()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if m := curl.FindStringSubmatch(out.String()); m != nil {
				key, url = m[1], m[2]
				break
			}
			select {
			case err := <-done:
				exited = true
				t.Fatalf("dev exited before its banner: %v; logs:\n%s", err, logs.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no curl line 60 s after start; stdout:\n%s\nlogs:\n%s", out.String(), logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Last4  string   `json:"last4"`
			Scopes []string `json:"scopes"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the printed curl line: status %d, %v", resp.StatusCode, err)
		}
		if body.Last4 != key[len(key)-4:] || len(body.Scopes) != len(store.KnownScopes) {
			t.Errorf("/key answered %+v for the demo key", body)
		}
		return key, url
	}
	key1, _ := run()
	key2, _ := run()
	if key1 != key2 {
		t.Errorf("the demo key changed across a restart of dev: %s… then %s…", key1[:13], key2[:13])
	}
}

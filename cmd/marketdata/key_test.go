package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// createdKey is what `marketdata key create` prints (--json), the one
// definition of that shape in this package's tests: the CLI test checks
// it, the drills take their key from it.
type createdKey struct {
	KeyID       string    `json:"key_id"`
	Secret      string    `json:"secret"`
	Last4       string    `json:"last4"`
	Scopes      []string  `json:"scopes"`
	IPAllowlist []string  `json:"ip_allowlist"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

func TestParseLifetime(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration // 0: refused
	}{
		{"90d", 90 * 24 * time.Hour},
		{"12h", 12 * time.Hour},
		{"3s", 3 * time.Second},
		{"1d12h", 36 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{"365d", 365 * 24 * time.Hour},
		{"8760h", 365 * 24 * time.Hour},
		{"366d", 0},
		{"365d1s", 0},
		{"8761h", 0},
		{"0s", 0},
		{"0d", 0},
		{"-1h", 0},
		{"-1d", 0},
		{"abc", 0},
		{"90", 0},
		{"d", 0},
		{"", 0},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseLifetime(c.in)
			if c.want == 0 {
				if err == nil || !strings.HasPrefix(err.Error(), "--expires-in: ") {
					t.Errorf("parseLifetime(%q): got %v, %v; want an error naming --expires-in", c.in, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("parseLifetime(%q): got %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}

func TestParseScopes(t *testing.T) {
	cases := []struct {
		in   string
		want []string // nil: refused
	}{
		{"markets:read", []string{"markets:read"}},
		{"markets:read,account:read,stream:read", []string{"markets:read", "account:read", "stream:read"}},
		{" markets:read , stream:read ", []string{"markets:read", "stream:read"}},
		{"markets:read,markets:read,account:read,markets:read", []string{"markets:read", "account:read"}},
		{"markets:read,,", []string{"markets:read"}},
		{"", []string{}},
		{"trade", nil},
		{"markets:read,trade", nil},
		{" trade ", nil},
		{"Trade", nil},
		{"markets:write", nil},
		{"markets:read,admin", nil},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseScopes(c.in)
			if c.want == nil {
				if err == nil || !strings.HasPrefix(err.Error(), "--scopes: ") {
					t.Errorf("parseScopes(%q): got %v, %v; want an error naming --scopes", c.in, got, err)
				}
				return
			}
			if err != nil || got == nil || !slices.Equal(got, c.want) {
				t.Errorf("parseScopes(%q): got %#v, %v; want %#v", c.in, got, err, c.want)
			}
		})
	}
}

func TestParseAllowlist(t *testing.T) {
	n := func(count int) []string {
		out := make([]string, count)
		for i := range out {
			out[i] = fmt.Sprintf("10.0.%d.0/24", i)
		}
		return out
	}
	cases := []struct {
		name string
		in   []string
		want []string // nil: refused
	}{
		{"none", nil, []string{}},
		{"IPv4 CIDR", []string{"192.0.2.0/24"}, []string{"192.0.2.0/24"}},
		{"host bits masked", []string{"10.1.2.3/8"}, []string{"10.0.0.0/8"}},
		{"bare IPv4 address", []string{"192.0.2.7"}, []string{"192.0.2.7/32"}},
		{"IPv6 CIDR", []string{"2001:db8::/32"}, []string{"2001:db8::/32"}},
		{"bare IPv6 address", []string{"2001:db8::1"}, []string{"2001:db8::1/128"}},
		{"duplicates removed", []string{"192.0.2.0/24", "192.0.2.9/24", " 192.0.2.0/24 "}, []string{"192.0.2.0/24"}},
		{"20 entries", n(20), n(20)},
		{"21 entries", n(21), nil},
		{"prefix too long", []string{"10.0.0.0/33"}, nil},
		{"IPv6 prefix too long", []string{"2001:db8::/129"}, nil},
		{"not an address", []string{"example.com"}, nil},
		{"empty entry", []string{""}, nil},
		{"one bad among good", []string{"192.0.2.0/24", "300.0.0.1"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseAllowlist(c.in)
			if c.want == nil {
				if err == nil || !strings.HasPrefix(err.Error(), "--allow-ip: ") {
					t.Errorf("parseAllowlist(%q): got %v, %v; want an error naming --allow-ip", c.in, got, err)
				}
				return
			}
			gotS := make([]string, len(got))
			for i, p := range got {
				gotS[i] = p.String()
			}
			if err != nil || !slices.Equal(gotS, c.want) {
				t.Errorf("parseAllowlist(%q): got %q, %v; want %q", c.in, gotS, err, c.want)
			}
		})
	}
}

// TestKeyCreateRefusesBadFlags: refusals that need no database, each
// naming its flag.
func TestKeyCreateRefusesBadFlags(t *testing.T) {
	cidrs := []string{}
	for i := range 21 {
		cidrs = append(cidrs, "--allow-ip", fmt.Sprintf("10.0.%d.0/24", i))
	}
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"--scopes", "markets:read"}, "--account"},
		{[]string{"--account", "acc_x", "--scopes", "markets:read,trade"}, "--scopes"},
		{[]string{"--account", "acc_x"}, "--scopes"}, // not given at all: a key with no scope is never made by omission
		{[]string{"--account", "acc_x", "--scopes", "markets:read", "--expires-in", "366d"}, "--expires-in"},
		{append([]string{"--account", "acc_x", "--scopes", "markets:read"}, cidrs...), "--allow-ip"},
		{[]string{"--account", "acc_x", "--scopes", "markets:read"}, "MD_KEY_PEPPER"},
	}
	for _, c := range cases {
		out, err := run(t, nil, append([]string{"key", "create", "--json"}, c.args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), c.flag+": ") || out != "" {
			t.Errorf("key create %v: got %q, %v; want no output and an error naming %s", c.args, out, err, c.flag)
		}
	}
}

// cliJSON runs a command that must succeed and decodes its one JSON object.
func cliJSON(t *testing.T, env map[string]string, v any, args ...string) string {
	t.Helper()
	out, err := run(t, env, append(args, "--json")...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil || dec.More() {
		t.Fatalf("%v: got %q, want one JSON object (%v)", args, out, err)
	}
	return out
}

// TestKeyLifecycleCLI drives the operator's commands end to end on a
// database of the test's own: account, refusal without access, grant, key
// create/list/revoke with --json, and the limit of 5 active keys.
func TestKeyLifecycleCLI(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"MD_DATABASE_URL": testenv.Database(t),
		"MD_KEY_PEPPER":   "cli-key-test-pepper-0123456789abcdef",
		"MD_NATS_URL":     testenv.NATSURL,
	}
	if _, err := run(t, env, "migrate"); err != nil {
		t.Fatal(err)
	}

	var acc struct {
		AccountID string `json:"account_id"`
	}
	cliJSON(t, env, &acc, "account", "create", "--name", "Acme")
	if !strings.HasPrefix(acc.AccountID, "acc_") {
		t.Fatalf("account create: got account_id %q", acc.AccountID)
	}

	out, err := run(t, env, "key", "create", "--account", acc.AccountID, "--scopes", "markets:read", "--json")
	if err == nil || !strings.Contains(err.Error(), "access_not_granted") || out != "" {
		t.Fatalf("key create without access: got %q, %v; want no output and an error with access_not_granted", out, err)
	}

	var granted map[string]any
	cliJSON(t, env, &granted, "access", "grant", "--account", acc.AccountID)
	if granted["access_granted"] != true || granted["account_id"] != acc.AccountID || granted["access_changed_at"] == nil {
		t.Fatalf("access grant: got %v, want access_granted true with access_changed_at", granted)
	}

	var created map[string]json.RawMessage
	raw := cliJSON(t, env, &created, "key", "create", "--account", acc.AccountID,
		"--scopes", "markets:read,stream:read", "--expires-in", "30d", "--allow-ip", "192.0.2.0/24", "--allow-ip", "2001:db8::/32")
	fields := make([]string, 0, len(created))
	for k := range created {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	if want := []string{"created_at", "expires_at", "ip_allowlist", "key_id", "last4", "scopes", "secret"}; !slices.Equal(fields, want) {
		t.Errorf("key create fields: got %v, want %v", fields, want)
	}
	var key createdKey
	if err := json.Unmarshal([]byte(raw), &key); err != nil {
		t.Fatal(err)
	}
	if err := store.CheckSecret(key.Secret); err != nil {
		t.Errorf("secret: got %q (%v), want mdk_live_, 43 characters of [A-Za-z0-9_-] and a matching checksum", key.Secret, err)
	}
	if len(key.Secret) >= 4 && key.Last4 != key.Secret[len(key.Secret)-4:] {
		t.Errorf("last4: got %q, want the secret's last four characters", key.Last4)
	}
	if !strings.HasPrefix(key.KeyID, "key_") || !slices.Equal(key.Scopes, []string{"markets:read", "stream:read"}) ||
		!slices.Equal(key.IPAllowlist, []string{"192.0.2.0/24", "2001:db8::/32"}) {
		t.Errorf("key create: got %+v", key)
	}
	if life := key.ExpiresAt.Sub(key.CreatedAt); life != 30*24*time.Hour || key.CreatedAt.Location() != time.UTC {
		t.Errorf("key create: got created_at %v expires_at %v, want 30 days apart in UTC", key.CreatedAt, key.ExpiresAt)
	}

	var list struct {
		Data []map[string]any `json:"data"`
	}
	raw = cliJSON(t, env, &list, "key", "list", "--account", acc.AccountID)
	if strings.Contains(raw, key.Secret) || strings.Contains(raw, strings.TrimPrefix(key.Secret, "mdk_live_")) {
		t.Errorf("key list prints the secret: %s", raw)
	}
	if len(list.Data) != 1 || list.Data[0]["key_id"] != key.KeyID || list.Data[0]["last4"] != key.Last4 || list.Data[0]["status"] != "active" {
		t.Errorf("key list: got %s, want the one active key", raw)
	}
	for _, rec := range list.Data {
		if _, ok := rec["secret"]; ok {
			t.Errorf("key list: record %v has a secret field", rec)
		}
	}

	var revoked map[string]any
	cliJSON(t, env, &revoked, "key", "revoke", "--key", key.KeyID)
	if revoked["key_id"] != key.KeyID || revoked["revoked_at"] == nil || revoked["status"] != "revoked" {
		t.Errorf("key revoke: got %v, want the key with revoked_at and status revoked", revoked)
	}
	if _, ok := revoked["secret"]; ok {
		t.Errorf("key revoke: got a secret field in %v", revoked)
	}

	// The revoked key does not count: five more are active, a sixth is refused.
	for i := range 5 {
		var k createdKey
		cliJSON(t, env, &k, "key", "create", "--account", acc.AccountID, "--scopes", "markets:read")
		if err := store.CheckSecret(k.Secret); err != nil {
			t.Errorf("active key %d: got %+v (%v)", i+1, k, err)
		}
	}
	out, err = run(t, env, "key", "create", "--account", acc.AccountID, "--scopes", "markets:read", "--json")
	if err == nil || !strings.Contains(err.Error(), "5 active keys") || out != "" {
		t.Errorf("6th active key: got %q, %v; want no output and an error about 5 active keys", out, err)
	}
	cliJSON(t, env, &list, "key", "list", "--account", acc.AccountID)
	if len(list.Data) != 6 {
		t.Errorf("key list: got %d keys, want 6 (1 revoked, 5 active)", len(list.Data))
	}

	out, err = run(t, env, "key", "revoke", "--key", "key_nope", "--json")
	if err == nil || out != "" {
		t.Errorf("revoke an unknown key: got %q, %v; want an error", out, err)
	}
}

// TestKeyCreateDev: `key create --dev` makes a key in dev's database, in its
// demo account, under its pepper, with neither MD_DATABASE_URL nor
// MD_KEY_PEPPER set; without --dev the missing pepper's error points to it.
func TestKeyCreateDev(t *testing.T) {
	env := devEnv(t)
	state := filepath.Join(t.TempDir(), "dev.json")
	sess, err := prepareDev(context.Background(), envOf(env), state, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	demo := credential(t, sess.cfg, sess.secret).Account.ID

	bare := map[string]string{"MD_NATS_URL": testenv.NATSURL} // neither the database nor the pepper
	_, err = run(t, bare, "key", "create", "--account", demo, "--scopes", "markets:read")
	if err == nil || !strings.HasPrefix(err.Error(), "MD_KEY_PEPPER: required") || !strings.Contains(err.Error(), "--dev") {
		t.Errorf("without a pepper: got %v; want MD_KEY_PEPPER: required, pointing to --dev", err)
	}

	var key createdKey
	out := cliJSON(t, bare, &key, "key", "create", "--dev", "--state", state, "--scopes", "markets:read")
	if strings.Contains(out, string(sess.cfg.KeyPepper)) {
		t.Error("key create --dev printed the pepper")
	}
	if c := credential(t, sess.cfg, key.Secret); c.Account.ID != demo || !slices.Equal(c.Key.Scopes, []string{"markets:read"}) {
		t.Errorf("key create --dev: account %s scopes %v; want the demo account %s, markets:read", c.Account.ID, c.Key.Scopes, demo)
	}

	_, err = run(t, bare, "key", "create", "--dev", "--state", filepath.Join(t.TempDir(), "none.json"), "--scopes", "markets:read")
	if err == nil || !strings.Contains(err.Error(), "marketdata dev") {
		t.Errorf("--dev without a state file: got %v; want a pointer to marketdata dev", err)
	}
}

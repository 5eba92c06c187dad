package api_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// akRecordKeys are the fields of a key record, in the contract's order.
var akRecordKeys = []string{"key_id", "account_id", "last4", "scopes", "ip_allowlist", "created_at", "expires_at", "revoked_at", "status"}

// akAccount is an account with keys in every state, for /account/keys.
type akAccount struct {
	id      string
	caller  string   // secret of an active key with account:read and markets:read
	secrets []string // every key's secret, none of which may be listed
	soon    string   // id of the active key that expires an hour from now
}

// akNewAccount makes an account with two active keys (the caller's and one
// with an allowlist and no scope), one that expires within the hour, two
// revoked and two that expired before the test began.
func akNewAccount(t *testing.T, w *world) akAccount {
	t.Helper()
	a := akAccount{id: w.account(t, true)}
	now := w.clock.Now()
	add := func(o keyOpts) *store.Key {
		secret, k := w.key(t, a.id, o)
		a.secrets = append(a.secrets, secret)
		return k
	}
	add(keyOpts{scopes: []string{store.ScopeAccountRead, store.ScopeMarketsRead}})
	a.caller = a.secrets[0]
	add(keyOpts{allow: []string{"10.0.0.0/8", "2001:db8::/32"}})
	a.soon = add(keyOpts{scopes: []string{store.ScopeStreamRead}, expires: now.Add(time.Hour)}).ID
	for range 2 {
		w.revoke(t, add(keyOpts{scopes: []string{store.ScopeMarketsRead}}).ID)
	}
	for i := range 2 {
		created := now.Add(-time.Duration(48+i) * time.Hour)
		add(keyOpts{created: created, expires: created.Add(24 * time.Hour)})
	}
	return a
}

// akWant is what /account/keys must list of account at the world's now for
// a status filter ("" = all): every key's record, ascending key_id.
func akWant(t *testing.T, w *world, account, status string) []map[string]any {
	t.Helper()
	keys, err := w.st.Keys(t.Context(), account)
	if err != nil {
		t.Fatal(err)
	}
	now := w.clock.Now()
	want := []map[string]any{}
	for _, k := range keys {
		st := k.Status(now)
		if status != "" && st != status {
			continue
		}
		scopes, cidrs := []any{}, []any{}
		for _, s := range k.Scopes {
			scopes = append(scopes, s)
		}
		for _, p := range k.IPAllowlist {
			cidrs = append(cidrs, p.String())
		}
		var revoked any
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.UTC().Format(time.RFC3339Nano)
		}
		want = append(want, map[string]any{
			"key_id": k.ID, "account_id": k.AccountID, "last4": k.Last4, "scopes": scopes, "ip_allowlist": cidrs,
			"created_at": k.CreatedAt.UTC().Format(time.RFC3339Nano), "expires_at": k.ExpiresAt.UTC().Format(time.RFC3339Nano),
			"revoked_at": revoked, "status": st,
		})
	}
	return want
}

// akWalk follows next_cursor from query to the last page, asking the nodes
// in turn, and returns the raw items.
func akWalk(t *testing.T, nodes []*node, secret, query string) []json.RawMessage {
	t.Helper()
	var items []json.RawMessage
	cursor := ""
	for page := 0; ; page++ {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		a := nodes[page%len(nodes)].get(t, "/public/v1/account/keys?"+q, secret)
		p := rtDecodePage(t, a)
		items = append(items, p.Data...)
		if p.NextCursor == nil {
			return items
		}
		if len(p.Data) == 0 || page > 50 {
			t.Fatalf("%s: page %d has %d items and a cursor", query, page, len(p.Data))
		}
		cursor = *p.NextCursor
	}
}

// akWantWalk checks a walk's items against want, values and field order.
func akWantWalk(t *testing.T, items []json.RawMessage, want []map[string]any) {
	t.Helper()
	if len(items) != len(want) {
		t.Fatalf("%d keys listed, want %d", len(items), len(want))
	}
	for i, raw := range items {
		rtWantObject(t, "key "+want[i]["key_id"].(string), raw, want[i], akRecordKeys)
	}
}

// akCursor is the next_cursor of the first page of path.
func akCursor(t *testing.T, n *node, path, secret string) string {
	t.Helper()
	p := rtDecodePage(t, n.get(t, path, secret))
	if p.NextCursor == nil {
		t.Fatalf("%s: no next_cursor", path)
	}
	return *p.NextCursor
}

func TestAccountKeys(t *testing.T) {
	w, nodes, _ := rtSetup(t, 2)
	acc := akNewAccount(t, w)
	other := akNewAccount(t, w)

	t.Run("every state, paged across two nodes", func(t *testing.T) {
		want := akWant(t, w, acc.id, "")
		if len(want) != 7 {
			t.Fatalf("fixture has %d keys, want 7", len(want))
		}
		for _, limit := range []string{"1", "2", "3", "7", "100"} {
			akWantWalk(t, akWalk(t, nodes, acc.caller, "limit="+limit), want)
		}
		akWantWalk(t, akWalk(t, nodes, acc.caller, ""), want)
		for _, st := range store.KeyStates {
			wantSt := akWant(t, w, acc.id, st)
			if len(wantSt) < 2 {
				t.Fatalf("fixture has %d %s keys, want at least 2", len(wantSt), st)
			}
			akWantWalk(t, akWalk(t, nodes, acc.caller, "limit=1&status="+st), wantSt)
		}
		// The other account's listing holds its own keys only.
		akWantWalk(t, akWalk(t, nodes, other.caller, "limit=2"), akWant(t, w, other.id, ""))
	})

	t.Run("no secret or hash in the answer", func(t *testing.T) {
		a := nodes[0].get(t, "/public/v1/account/keys?limit=100", acc.caller)
		rtWant200(t, a)
		body := string(a.body)
		for _, s := range append(slices.Clone(acc.secrets), other.secrets...) {
			if strings.Contains(body, s) || strings.Contains(body, s[len(store.SecretPrefix):]) {
				t.Errorf("the answer holds a secret: %s", body)
			}
			hash := store.HashSecret(w.pepper, s)
			for _, enc := range []string{base64.StdEncoding.EncodeToString(hash), base64.RawURLEncoding.EncodeToString(hash)} {
				if strings.Contains(body, enc) {
					t.Errorf("the answer holds a secret's hash: %s", body)
				}
			}
		}
		if strings.Contains(body, "secret") || strings.Contains(body, "hash") {
			t.Errorf("the answer names a secret or hash field: %s", body)
		}
	})

	t.Run("a key created a moment ago is listed on every node", func(t *testing.T) {
		before := rtDecodePage(t, nodes[0].get(t, "/public/v1/account/keys?status=active&limit=100", acc.caller))
		_, k := w.key(t, acc.id, keyOpts{scopes: []string{store.ScopeMarketsRead}})
		for _, n := range nodes {
			got := rtIDs(t, n.get(t, "/public/v1/account/keys?status=active&limit=100", acc.caller), "key_id")
			if !slices.Contains(got, k.ID) || len(got) != len(before.Data)+1 {
				t.Errorf("%s: active keys %q, want the %d listed before and %s", n.base, got, len(before.Data), k.ID)
			}
		}
		w.revoke(t, k.ID)
	})

	t.Run("cursor binding", func(t *testing.T) {
		keysCursor := akCursor(t, nodes[0], "/public/v1/account/keys?limit=1", acc.caller)
		revokedCursor := akCursor(t, nodes[0], "/public/v1/account/keys?limit=1&status=revoked", acc.caller)
		eventsCursor := akCursor(t, nodes[0], "/public/v1/events?limit=1", acc.caller)
		raw, err := base64.RawURLEncoding.DecodeString(keysCursor)
		if err != nil {
			t.Fatal(err)
		}
		flip := func(i int) string {
			b := slices.Clone(raw)
			b[i] ^= 0x01
			return base64.RawURLEncoding.EncodeToString(b)
		}
		// The replays that stay valid: another limit, the same status.
		for _, q := range []string{"limit=100&cursor=" + keysCursor, "cursor=" + revokedCursor + "&status=revoked&limit=7"} {
			rtWant200(t, nodes[1].get(t, "/public/v1/account/keys?"+q, acc.caller))
		}
		for _, tc := range []struct {
			name, path, secret string
		}{
			{"other status", "/public/v1/account/keys?status=active&cursor=" + keysCursor, acc.caller},
			{"status dropped", "/public/v1/account/keys?cursor=" + revokedCursor, acc.caller},
			{"status changed", "/public/v1/account/keys?status=expired&cursor=" + revokedCursor, acc.caller},
			{"an /events cursor here", "/public/v1/account/keys?cursor=" + eventsCursor, acc.caller},
			{"a keys cursor on /events", "/public/v1/events?cursor=" + keysCursor, acc.caller},
			{"another account", "/public/v1/account/keys?cursor=" + keysCursor, other.caller},
			{"first byte altered", "/public/v1/account/keys?cursor=" + flip(0), acc.caller},
			{"middle byte altered", "/public/v1/account/keys?cursor=" + flip(len(raw)/2), acc.caller},
			{"last byte altered", "/public/v1/account/keys?cursor=" + flip(len(raw)-1), acc.caller},
			{"truncated", "/public/v1/account/keys?cursor=" + keysCursor[:len(keysCursor)-1], acc.caller},
			{"extended", "/public/v1/account/keys?cursor=" + keysCursor + "A", acc.caller},
			{"not base64", "/public/v1/account/keys?cursor=" + url.QueryEscape("!!"+keysCursor), acc.caller},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := nodes[1].get(t, tc.path, tc.secret)
				wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", "cursor")
				wantLimitHeaders(t, a, true)
			})
		}
	})

	t.Run("bad parameters are 422 after the window", func(t *testing.T) {
		bad := []struct{ query, names string }{
			{"limit=0", "limit"}, {"limit=101", "limit"}, {"limit=abc", "limit"}, {"limit=", "limit"},
			{"limit=-1", "limit"}, {"status=bogus", "status"}, {"status=ACTIVE", "status"}, {"status=", "status"},
			{"status=active,revoked", "status"},
		}
		for _, tc := range bad {
			a := nodes[0].get(t, "/public/v1/account/keys?"+tc.query, acc.caller)
			wantError(t, a, http.StatusUnprocessableEntity, "invalid_request", tc.names)
			wantLimitHeaders(t, a, true)
		}
		// With the account's window used up, the same requests are 429.
		tight := w.node(t, withLimit(2))
		waitRoomInWindow(t, w, time.Minute, 10*time.Second)
		fresh := akNewAccount(t, w)
		for range 2 {
			rtWant200(t, tight.get(t, "/public/v1/account/keys", fresh.caller))
		}
		for _, tc := range bad {
			a := tight.get(t, "/public/v1/account/keys?"+tc.query, fresh.caller)
			wantError(t, a, http.StatusTooManyRequests, "rate_limited", "limit")
		}
	})

	t.Run("scope account:read is required", func(t *testing.T) {
		for _, scopes := range [][]string{{}, {store.ScopeMarketsRead, store.ScopeStreamRead}} {
			secret, _ := w.key(t, acc.id, keyOpts{scopes: scopes})
			a := nodes[1].get(t, "/public/v1/account/keys?status=bogus", secret)
			wantError(t, a, http.StatusForbidden, "insufficient_scope", "account:read")
			wantLimitHeaders(t, a, false)
		}
	})

	t.Run("expiry is judged with the node's clock", func(t *testing.T) {
		listed := func(status string) []string {
			return rtIDs(t, nodes[1].get(t, "/public/v1/account/keys?limit=100&status="+status, acc.caller), "key_id")
		}
		if !slices.Contains(listed("active"), acc.soon) || slices.Contains(listed("expired"), acc.soon) {
			t.Fatalf("key %s expiring within the hour is not listed as active", acc.soon)
		}
		w.clock.Advance(2 * time.Hour)
		if slices.Contains(listed("active"), acc.soon) || !slices.Contains(listed("expired"), acc.soon) {
			t.Errorf("two hours later, key %s (expired) is not listed as expired: active %q, expired %q",
				acc.soon, listed("active"), listed("expired"))
		}
		akWantWalk(t, akWalk(t, nodes, acc.caller, "limit=3"), akWant(t, w, acc.id, ""))
		if got := rtIDs(t, nodes[0].get(t, "/public/v1/account/keys?limit=100", acc.caller), "key_id"); !reflect.DeepEqual(got, slices.Sorted(slices.Values(got))) {
			t.Errorf("key ids %q are not ascending", got)
		}
	})
}

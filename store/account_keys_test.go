package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/marketdata/marketdata/store"
)

// TestAccountKeys: a page holds the account's keys only, ascending by id,
// after the cursor, at most limit, in the state asked for at the caller's
// now (a key past expires_at is expired though nothing was written).
func TestAccountKeys(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := t.Context()
	now := time.Now().UTC()
	a, other := keysAccount(t, s, true), keysAccount(t, s, true)
	create := func(accountID string, created time.Time, life time.Duration) *store.Key {
		nk, _ := keysNew(accountID, created, life)
		k, err := s.CreateKey(ctx, nk)
		if err != nil {
			t.Fatalf("CreateKey: %v", err)
		}
		return k
	}
	active := create(a.ID, now, 24*time.Hour)
	soon := create(a.ID, now, time.Hour)
	revoked := create(a.ID, now, 24*time.Hour)
	if _, err := s.RevokeKey(ctx, revoked.ID, now); err != nil {
		t.Fatal(err)
	}
	expired := create(a.ID, now.Add(-48*time.Hour), 24*time.Hour)
	create(other.ID, now, 24*time.Hour)

	ids := func(status string, at time.Time, limit int) []string {
		t.Helper()
		var got []string
		for after := ""; ; {
			page, err := s.AccountKeys(ctx, a.ID, status, after, limit, at)
			if err != nil {
				t.Fatalf("AccountKeys(%q): %v", status, err)
			}
			if len(page) > limit {
				t.Fatalf("AccountKeys(%q, limit %d): %d keys", status, limit, len(page))
			}
			for _, k := range page {
				if k.AccountID != a.ID {
					t.Errorf("key %s of account %s listed for %s", k.ID, k.AccountID, a.ID)
				}
				got = append(got, k.ID)
			}
			if len(page) < limit {
				return got
			}
			after = page[len(page)-1].ID
		}
	}
	sorted := func(keys ...*store.Key) []string {
		var out []string
		for _, k := range keys {
			out = append(out, k.ID)
		}
		slices.Sort(out)
		return out
	}
	later := now.Add(2 * time.Hour)
	for _, tc := range []struct {
		status string
		at     time.Time
		want   []string
	}{
		{"", now, sorted(active, soon, revoked, expired)},
		{store.KeyActive, now, sorted(active, soon)},
		{store.KeyRevoked, now, sorted(revoked)},
		{store.KeyExpired, now, sorted(expired)},
		{store.KeyActive, later, sorted(active)},
		{store.KeyExpired, later, sorted(soon, expired)},
		{"", later, sorted(active, soon, revoked, expired)},
	} {
		for _, limit := range []int{1, 2, 100} {
			if got := ids(tc.status, tc.at, limit); !slices.Equal(got, tc.want) {
				t.Errorf("status %q at %s, limit %d: %q, want %q", tc.status, tc.at.Sub(now), limit, got, tc.want)
			}
		}
	}
	if _, err := s.AccountKeys(ctx, a.ID, "bogus", "", 10, now); err == nil {
		t.Error("AccountKeys with status bogus: no error")
	}
}

package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/store"
)

// rtData decodes a {"data":[...], ...} answer's items.
func rtData(t *testing.T, a answer) []map[string]any {
	t.Helper()
	var body struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("decode %.300s: %v", a.body, err)
	}
	return body.Data
}

// rtIDs lists field of every item of a data answer (nil unless 200).
func rtIDs(t *testing.T, a answer, field string) []string {
	t.Helper()
	if a.status != http.StatusOK {
		return nil
	}
	ids := []string{}
	for _, it := range rtData(t, a) {
		id, _ := it[field].(string)
		ids = append(ids, id)
	}
	return ids
}

// rtKeys lists an object's keys in the order the JSON holds them.
func rtKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%.200s: not an object", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// rtRawItems splits a data answer into its items' raw JSON.
func rtRawItems(t *testing.T, a answer) []json.RawMessage {
	t.Helper()
	var body struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("decode %.300s: %v", a.body, err)
	}
	return body.Data
}

// rtWantItems checks items against the expected ones: same values, and keys
// in the contract's order (keys lists every possible key; an item has those
// its expected value has).
func rtWantItems(t *testing.T, a answer, want []map[string]any, keys []string) {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %.300s", a.status, a.body)
	}
	raws := rtRawItems(t, a)
	if len(raws) != len(want) {
		t.Fatalf("%d items, want %d: %.500s", len(raws), len(want), a.body)
	}
	for i, raw := range raws {
		rtWantObject(t, fmt.Sprintf("item %d", i), raw, want[i], keys)
	}
}

// rtWantObject checks one JSON object's values and key order.
func rtWantObject(t *testing.T, what string, raw []byte, want map[string]any, keys []string) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%s: decode %.300s: %v", what, raw, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
	var wantKeys []string
	for _, k := range keys {
		if _, ok := want[k]; ok {
			wantKeys = append(wantKeys, k)
		}
	}
	if got := rtKeys(t, raw); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("%s: keys = %q, want %q", what, got, wantKeys)
	}
}

// rtWant200 checks a data answer's basics: 200, JSON, an ETag, the limits.
func rtWant200(t *testing.T, a answer) {
	t.Helper()
	wantBasics(t, a)
	if a.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %.300s", a.status, a.body)
	}
	if got := a.header.Get("Content-Type"); !strings.HasPrefix(got, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	if a.header.Get("ETag") == "" {
		t.Error("ETag missing on a 200")
	}
	wantLimitHeaders(t, a, true)
}

// rtSecret is a key with scope markets:read on a fresh account.
func rtSecret(t *testing.T, w *world) string {
	t.Helper()
	s, _ := w.newKey(t, keyOpts{scopes: []string{store.ScopeMarketsRead}})
	return s
}

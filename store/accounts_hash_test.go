package store_test

import (
	"bytes"
	"testing"

	"github.com/marketdata/marketdata/store"
)

// TestHasherMatchesHashSecret: the pooled hasher the API uses computes the
// same hash as key creation stores.
func TestHasherMatchesHashSecret(t *testing.T) {
	pepper := []byte("pepper-pepper-pepper-pepper-pepper")
	h := store.NewHasher(pepper)
	for range 3 {
		s := store.NewSecret()
		if got, want := h.Hash(nil, s), store.HashSecret(pepper, s); !bytes.Equal(got, want) {
			t.Fatalf("Hasher.Hash(%q) = %x, want %x", s, got, want)
		}
	}
}

package store_test

import (
	"errors"
	"hash/crc32"
	"math/big"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/marketdata/marketdata/store"
)

// secretShape is the contract's pattern, apart from the checksum.
var secretShape = regexp.MustCompile(`^mdk_live_[A-Za-z0-9_-]{43}$`)

// checksumOf is docs/api.md's algorithm written independently of the
// store's: CRC-32 (IEEE) of the first 37 characters after the prefix, in
// base62 with digits 0-9, A-Z, a-z (math/big writes a-z before A-Z, hence
// the case swap), left-padded with '0' to 6 characters.
func checksumOf(head string) string {
	digits := new(big.Int).SetUint64(uint64(crc32.ChecksumIEEE([]byte(strings.TrimPrefix(head, "mdk_live_"))))).Text(62)
	swapped := strings.Map(func(r rune) rune {
		if unicode.IsUpper(r) {
			return unicode.ToLower(r)
		}
		return unicode.ToUpper(r)
	}, digits)
	return strings.Repeat("0", 6-len(swapped)) + swapped
}

// withChecksum returns head (prefix and 37 characters) and its checksum.
func withChecksum(head string) string { return head + checksumOf(head) }

// wantValid is the oracle: the pattern holds and the last 6 characters are
// the checksum of the rest.
func wantValid(s string) bool {
	return secretShape.MatchString(s) && s[len(s)-6:] == checksumOf(s[:len(s)-6])
}

// TestSecretChecksumKnownValue pins the algorithm to the worked example in
// docs/api.md, so the documentation and the code cannot drift apart.
func TestSecretChecksumKnownValue(t *testing.T) {
	const head = "mdk_live_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	if got, want := crc32.ChecksumIEEE([]byte(head[len("mdk_live_"):])), uint32(2607665852); got != want {
		t.Fatalf("CRC-32 of the example: got %d, want %d", got, want)
	}
	if got, want := checksumOf(head), "2qTV0e"; got != want {
		t.Fatalf("checksum of the example: got %q, want %q", got, want)
	}
	if err := store.CheckSecret(head + "2qTV0e"); err != nil {
		t.Fatalf("CheckSecret(docs example): got %v, want nil", err)
	}
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "2607665852", "`2qTV0e`", "37 × `A`"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/api.md does not give %q of the worked example", want)
		}
	}
}

func TestCheckSecret(t *testing.T) {
	head := "mdk_live_" + strings.Repeat("aZ09_-", 7)[:37]
	good := withChecksum(head)
	sum := good[len(head):]
	flip := func(c byte) string { // another character of the base62 alphabet
		if c == '0' {
			return "1"
		}
		return "0"
	}
	cases := []struct {
		name, secret string
		want         error // nil, ErrSecretMalformed or ErrSecretChecksum
		msgHas       string
	}{
		{"well formed", good, nil, ""},
		{"checksum of all zeros", withChecksum("mdk_live_" + strings.Repeat("A", 37)), nil, ""},
		{"random part changed", head[:20] + "Q" + head[21:] + sum, store.ErrSecretChecksum, "mistyped or truncated"},
		{"checksum changed", head + flip(sum[0]) + sum[1:], store.ErrSecretChecksum, "mistyped or truncated"},
		{"last character changed", good[:len(good)-1] + flip(good[len(good)-1]), store.ErrSecretChecksum, "mistyped or truncated"},
		{"two characters swapped", head[:10] + head[11:12] + head[10:11] + head[12:] + sum, store.ErrSecretChecksum, "mistyped"},
		{"checksum with '_'", head + "_" + sum[1:], store.ErrSecretChecksum, "checksum"},
		{"shape only (pre-checksum key)", "mdk_live_" + strings.Repeat("A", 43), store.ErrSecretChecksum, "checksum"},
		{"42 characters", good[:len(good)-1], store.ErrSecretMalformed, "42 characters"},
		{"44 characters", good + "a", store.ErrSecretMalformed, "44 characters"},
		{"test prefix", "mdk_test_" + good[9:], store.ErrSecretMalformed, "does not start with mdk_live_"},
		{"upper-case prefix", "MDK_LIVE_" + good[9:], store.ErrSecretMalformed, "does not start"},
		{"no prefix", good[9:], store.ErrSecretMalformed, "does not start"},
		{"plus", good[:len(good)-1] + "+", store.ErrSecretMalformed, "character 43"},
		{"slash", good[:len(good)-1] + "/", store.ErrSecretMalformed, "[A-Za-z0-9_-]"},
		{"padding", good[:len(good)-1] + "=", store.ErrSecretMalformed, "[A-Za-z0-9_-]"},
		{"trailing newline", good + "\n", store.ErrSecretMalformed, "44 characters"},
		{"space inside", good[:29] + " " + good[30:], store.ErrSecretMalformed, "character 21"},
		{"non-ASCII inside", good[:29] + "é" + good[31:], store.ErrSecretMalformed, "character 21"},
		{"prefix only", "mdk_live_", store.ErrSecretMalformed, "0 characters"},
		{"empty", "", store.ErrSecretMalformed, "does not start"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := store.CheckSecret(c.secret)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("CheckSecret(%q): got %v, want nil", c.secret, err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("CheckSecret(%q): got %v, want %v", c.secret, err, c.want)
			case err != nil && !strings.Contains(err.Error(), c.msgHas):
				t.Errorf("CheckSecret(%q): message %q does not say %q", c.secret, err, c.msgHas)
			}
			if got := store.ValidSecret(c.secret); got != (c.want == nil) {
				t.Errorf("ValidSecret(%q): got %v, want %v", c.secret, got, c.want == nil)
			}
			if got := wantValid(c.secret); got != (c.want == nil) {
				t.Errorf("oracle on %q: got %v, want %v (the table is wrong)", c.secret, got, c.want == nil)
			}
		})
	}
}

// TestCheckSecretNeverEchoes: a refusal names lengths and positions, never
// any part of the secret, since the message reaches clients and logs.
func TestCheckSecretNeverEchoes(t *testing.T) {
	good := store.NewSecret()
	other := "Q"
	if good[30] == 'Q' {
		other = "R"
	}
	for _, s := range []string{good[:len(good)-1], good + "x", good[:30] + "+" + good[31:], good[:30] + other + good[31:], good[9:]} {
		err := store.CheckSecret(s)
		if err == nil {
			t.Fatalf("CheckSecret(%q): got nil, want a refusal", s)
		}
		for _, part := range []string{good[9:15], good[20:26], good[len(good)-6:]} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("CheckSecret(%q) = %q: echoes %q of the secret", s, err, part)
			}
		}
	}
}

// TestNewSecret: fresh secrets pass the check (by the store and by the
// documented algorithm) and do not repeat.
func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		s := store.NewSecret()
		if err := store.CheckSecret(s); err != nil || !wantValid(s) {
			t.Fatalf("NewSecret: got %q (%v), want mdk_live_, 37 characters of [A-Za-z0-9_-] and their checksum", s, err)
		}
		if seen[s] {
			t.Fatalf("NewSecret: got %q twice", s)
		}
		seen[s] = true
	}
}

// TestCheckSecretAllocates: the check runs on every API request; accepting
// a secret allocates nothing.
func TestCheckSecretAllocates(t *testing.T) {
	s := store.NewSecret()
	if n := testing.AllocsPerRun(100, func() {
		if store.CheckSecret(s) != nil {
			t.Fatal("refused a fresh secret")
		}
	}); n != 0 {
		t.Errorf("CheckSecret of a valid secret: %v allocations, want 0", n)
	}
}

// alphabet is every character a secret may hold.
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

// FuzzCheckSecret: for any string, CheckSecret accepts it exactly when the
// pattern and the checksum hold (by the independent oracle), and a refusal
// is one of the two reasons. When the string has the shape of a secret, the
// secret with its checksum fixed is accepted and every one-character change
// of it is refused. NewSecret is always accepted.
func FuzzCheckSecret(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		err := store.CheckSecret(s)
		if got, want := err == nil, wantValid(s); got != want {
			t.Fatalf("CheckSecret(%q): got %v, want valid = %v", s, err, want)
		}
		if err != nil && !errors.Is(err, store.ErrSecretMalformed) && !errors.Is(err, store.ErrSecretChecksum) {
			t.Fatalf("CheckSecret(%q): got %v, want ErrSecretMalformed or ErrSecretChecksum", s, err)
		}
		if secretShape.MatchString(s) != (err == nil || errors.Is(err, store.ErrSecretChecksum)) {
			t.Fatalf("CheckSecret(%q): got %v; a checksum refusal must mean the shape holds", s, err)
		}
		if n := store.NewSecret(); store.CheckSecret(n) != nil {
			t.Fatalf("NewSecret: got %q, refused by CheckSecret: %v", n, store.CheckSecret(n))
		}
		if !secretShape.MatchString(s) {
			return
		}
		good := withChecksum(s[:len(s)-6])
		if err := store.CheckSecret(good); err != nil {
			t.Fatalf("CheckSecret(%q) with its checksum: got %v, want nil", good, err)
		}
		b := []byte(good)
		for i := range b {
			orig := b[i]
			for j := range len(alphabet) {
				if alphabet[j] == orig {
					continue
				}
				b[i] = alphabet[j]
				if store.CheckSecret(string(b)) == nil {
					t.Fatalf("CheckSecret(%q): accepted %q, one character off", good, b)
				}
			}
			b[i] = orig
		}
	})
}

package store_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/store"
)

// idRegexp and categoryRegexp are the patterns as the contract writes
// them: the byte loops must agree with them on every input.
var (
	idRegexp       = regexp.MustCompile(`^` + store.IDPattern + `$`)
	categoryRegexp = regexp.MustCompile(`^` + store.CategoryPattern + `$`)
)

func TestValidID(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want bool
	}{
		{"empty", "", false},
		{"one character", "a", true},
		{"max length", strings.Repeat("a", store.MaxIDLen), true},
		{"one over max length", strings.Repeat("a", store.MaxIDLen+1), false},
		{"lower case", "abcdefghijklmnopqrstuvwxyz", true},
		{"upper case", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", true},
		{"digits", "0123456789", true},
		{"underscore", "_", true},
		{"hyphen", "-", true},
		{"mixed", "KXFED-27MAR_cut25", true},
		{"dot", "a.b", false},
		{"space", "a b", false},
		{"slash", "a/b", false},
		{"comma", "a,b", false},
		{"star", "a*", false},
		{"greater than", "a>", false},
		{"colon", "a:b", false},
		{"brace", "{a}", false},
		{"percent", "a%20", false},
		{"NUL", "a\x00", false},
		{"newline", "a\n", false},
		{"non-ASCII letter", "café", false},
		{"non-ASCII digit", "١٢", false},
		{"max length of valid UTF-8 that is not ASCII", strings.Repeat("é", store.MaxIDLen/2), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := store.ValidID(c.in); got != c.want {
				t.Errorf("ValidID(%q): got %v, want %v", c.in, got, c.want)
			}
			if got := idRegexp.MatchString(c.in); got != c.want {
				t.Errorf("the table disagrees with IDPattern on %q: pattern says %v", c.in, got)
			}
		})
	}
}

func TestValidCategory(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want bool
	}{
		{"empty", "", false},
		{"one character", "a", true},
		{"max length", strings.Repeat("a", store.MaxCategoryLen), true},
		{"one over max length", strings.Repeat("a", store.MaxCategoryLen+1), false},
		{"lower case", "abcdefghijklmnopqrstuvwxyz", true},
		{"digits", "0123456789", true},
		{"hyphen", "-", true},
		{"mixed", "us-politics-2028", true},
		{"upper case", "Politics", false},
		{"underscore", "a_b", false},
		{"dot", "a.b", false},
		{"space", "a b", false},
		{"colon", "a:b", false},
		{"star", "*", false},
		{"non-ASCII", "économie", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := store.ValidCategory(c.in); got != c.want {
				t.Errorf("ValidCategory(%q): got %v, want %v", c.in, got, c.want)
			}
			if got := categoryRegexp.MatchString(c.in); got != c.want {
				t.Errorf("the table disagrees with CategoryPattern on %q: pattern says %v", c.in, got)
			}
		})
	}
}

// TestRulesEveryByte: each of the 256 byte values, alone and inside an
// otherwise valid id or category, is accepted exactly when the pattern
// accepts it.
func TestRulesEveryByte(t *testing.T) {
	for b := 0; b < 256; b++ {
		for _, s := range []string{string([]byte{byte(b)}), "a" + string([]byte{byte(b)}) + "z"} {
			if got, want := store.ValidID(s), idRegexp.MatchString(s); got != want {
				t.Errorf("ValidID(%q): got %v, want %v (IDPattern)", s, got, want)
			}
			if got, want := store.ValidCategory(s), categoryRegexp.MatchString(s); got != want {
				t.Errorf("ValidCategory(%q): got %v, want %v (CategoryPattern)", s, got, want)
			}
		}
	}
}

// FuzzRules checks the byte loops against the patterns on any input.
func FuzzRules(f *testing.F) {
	for _, s := range []string{"", "a", "ev-1", "A_b-9", "a.b", strings.Repeat("x", 64), strings.Repeat("x", 65), "économie", "politics"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := store.ValidID(s), idRegexp.MatchString(s); got != want {
			t.Errorf("ValidID(%q): got %v, want %v (IDPattern)", s, got, want)
		}
		if got, want := store.ValidCategory(s), categoryRegexp.MatchString(s); got != want {
			t.Errorf("ValidCategory(%q): got %v, want %v (CategoryPattern)", s, got, want)
		}
	})
}

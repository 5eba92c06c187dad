package api

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/store"
)

// cwNumber is the min_confidence grammar, stated independently of
// decimalNumber: an optional minus, digits with at most one point (a digit
// on one side at least), an optional exponent.
var cwNumber = regexp.MustCompile(`^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// cwMatchFilter is the contract's reading of min_confidence and relation:
// absent is no filter; a number of at most 64 characters whose float64 is
// in [0, 1] (a negative zero is 0); relation identity alone.
func cwMatchFilter(minConfidence, relation string) (store.MatchFilter, bool) {
	var f store.MatchFilter
	switch relation {
	case "":
	case "identity":
		f.Relation = relation
	default:
		return f, false
	}
	if minConfidence == "" {
		return f, true
	}
	if len(minConfidence) > 64 || !cwNumber.MatchString(minConfidence) {
		return f, false
	}
	v, err := strconv.ParseFloat(minConfidence, 64)
	mant, _, _ := strings.Cut(strings.ToLower(minConfidence), "e")
	nonzero := strings.Trim(mant, "-.0") != ""
	if err != nil || v > 1 || (nonzero && v < 0) {
		return f, false
	}
	f.MinConfidence = v
	if nonzero && v == 0 {
		f.MinConfidence = math.SmallestNonzeroFloat64
	}
	if v == 0 && !nonzero {
		f.MinConfidence = 0
	}
	return f, true
}

// cwCheckMatchFilter checks an accepted filter against the reference: the
// same values, a confidence in [0, 1] and above 0 exactly when the text
// names a positive number.
func cwCheckMatchFilter(t *testing.T, minConfidence, relation string, got, want store.MatchFilter) {
	t.Helper()
	if got != want || math.IsNaN(got.MinConfidence) || got.MinConfidence < 0 || got.MinConfidence > 1 || math.Signbit(got.MinConfidence) {
		t.Fatalf("min_confidence %q, relation %q parsed as %+v, want %+v", minConfidence, relation, got, want)
	}
}

// FuzzCursorMatchFilters: a cursor issued under one pair of match filters
// is accepted under another exactly when they are the same filter (the
// same values; min_confidence 0 and absent are one), so that two texts of
// one number share cursors and two numbers never do.
func FuzzCursorMatchFilters(f *testing.F) {
	for _, seed := range [][4]string{
		{"0.5", "identity", "0.50", "identity"}, {"0.5", "", "5e-1", ""}, {"0", "", "", ""},
		{"0.5", "identity", "0.5", ""}, {"1e-400", "", "5e-324", ""}, {"0.1", "", "0.10000000000000001", ""},
		{"0.3", "", "0.30000000000000004", ""}, {"-0", "", "0.0", ""}, {"1", "identity", "1.0e0", "identity"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], "ev-1")
	}
	f.Fuzz(func(t *testing.T, confA, relA, confB, relB, id string) {
		a, errA := parseMatchFilter(confA, relA)
		b, errB := parseMatchFilter(confB, relB)
		if errA != nil || errB != nil || !store.ValidID(id) {
			return
		}
		bind := func(m store.MatchFilter) cursorBinding {
			return cursorBinding{route: "events", account: "acc_fuzz", filters: filterKey(store.ListFilter{Category: "c", MatchFilter: m})}
		}
		cursor := encodeCursor(cwFuzzSecret, bind(a), id)
		got, err := decodeCursor(cwFuzzSecret, bind(b), cursor)
		if same := a == b; same != (err == nil) {
			t.Fatalf("cursor of %+v (%q %q) under %+v (%q %q): %q, %v; the same filter: %v", a, confA, relA, b, confB, relB, got, err, same)
		}
		if err != nil && !errors.Is(err, errBadCursor) {
			t.Fatalf("refused with %v, want errBadCursor", err)
		}
		if err == nil && got != id {
			t.Fatalf("cursor for %q read back as %q", id, got)
		}
	})
}

// TestParseMatchFilter: the values taken and how each refusal reads.
func TestParseMatchFilter(t *testing.T) {
	for _, tc := range []struct {
		conf, rel string
		want      store.MatchFilter
	}{
		{"", "", store.MatchFilter{}},
		{"0", "", store.MatchFilter{}},
		{"-0", "", store.MatchFilter{}},
		{"0.000", "identity", store.MatchFilter{Relation: "identity"}},
		{"0.8", "", store.MatchFilter{MinConfidence: 0.8}},
		{".8", "", store.MatchFilter{MinConfidence: 0.8}},
		{"8e-1", "", store.MatchFilter{MinConfidence: 0.8}},
		{"80E-2", "", store.MatchFilter{MinConfidence: 0.8}},
		{"1", "identity", store.MatchFilter{MinConfidence: 1, Relation: "identity"}},
		{"1.", "", store.MatchFilter{MinConfidence: 1}},
		{"0001.0000", "", store.MatchFilter{MinConfidence: 1}},
		{"1e-400", "", store.MatchFilter{MinConfidence: math.SmallestNonzeroFloat64}},
		{"0.0e999999", "", store.MatchFilter{}},
	} {
		got, err := parseMatchFilter(tc.conf, tc.rel)
		if err != nil || got != tc.want {
			t.Errorf("parseMatchFilter(%q, %q) = %+v, %v; want %+v", tc.conf, tc.rel, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ conf, rel, param, says string }{
		{sentEmpty, "", "min_confidence", "is empty"},
		{"abc", "", "min_confidence", "is not a number"},
		{"NaN", "", "min_confidence", "is not a number"},
		{"Inf", "", "min_confidence", "is not a number"},
		{"0x1p-1", "", "min_confidence", "is not a number"},
		{"0_5", "", "min_confidence", "is not a number"},
		{" 0.5", "", "min_confidence", "is not a number"},
		{"+0.5", "", "min_confidence", "is not a number"},
		{"0.5.1", "", "min_confidence", "is not a number"},
		{".", "", "min_confidence", "is not a number"},
		{"1e", "", "min_confidence", "is not a number"},
		{"1e+", "", "min_confidence", "is not a number"},
		{"1.5", "", "min_confidence", "is above 1"},
		{"1e400", "", "min_confidence", "is above 1"},
		{"1.0000001", "", "min_confidence", "is above 1"},
		{"-0.5", "", "min_confidence", "is below 0"},
		{"-1e400", "", "min_confidence", "is below 0"},
		{"0." + strings.Repeat("0", 63) + "1", "", "min_confidence", "longer than 64"},
		{"", "complement", "relation", "must be identity"},
		{"", "Identity", "relation", "must be identity"},
		{"", sentEmpty, "relation", "is empty"},
		{"0.5", "all", "relation", "must be identity"},
	} {
		_, err := parseMatchFilter(tc.conf, tc.rel)
		if err == nil || err.Kind != KindInvalidRequest || !strings.HasPrefix(err.Message, tc.param+" ") || !strings.Contains(err.Message, tc.says) {
			t.Errorf("parseMatchFilter(%q, %q) = %v; want invalid_request: %s %s", tc.conf, tc.rel, err, tc.param, tc.says)
		}
	}
}

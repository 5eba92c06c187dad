package api

import (
	"math"
	"strconv"
	"strings"

	"github.com/marketdata/marketdata/store"
)

// The match filters /events and /markets/search take (contract §3 "Match
// metadata"): min_confidence and relation.

// maxConfidenceLen bounds min_confidence's text: 17 significant digits are
// all a float64 holds, and the rest is room for zeros and an exponent.
const maxConfidenceLen = 64

// parseMatchFilter reads min_confidence and relation; absent parameters do
// not filter. min_confidence=0 keeps every event, so it is the same filter
// as none (as min_venues 1 is min_venues 2).
func parseMatchFilter(minConfidence, relation string) (store.MatchFilter, *Error) {
	var f store.MatchFilter
	if minConfidence != "" {
		c, err := parseConfidence(minConfidence)
		if err != nil {
			return f, err
		}
		f.MinConfidence = c
	}
	switch relation {
	case "":
	case store.RelationIdentity:
		f.Relation = store.RelationIdentity
	case sentEmpty:
		return f, invalidParam("relation is empty: the one relation it filters on is identity")
	default:
		return f, invalidParam("relation must be identity (the one relation it filters on)")
	}
	return f, nil
}

// parseConfidence reads a number in [0, 1] written as decimal digits with
// an optional fraction and exponent (0.8, .8, 8e-1, 1); a sign is read
// only to say that a negative number is below 0. NaN, infinities, hex and
// anything else are not numbers here. A positive number too small for a
// float64 is the smallest positive one, not 0: it still fails a link
// without metadata, which passes only 0.
func parseConfidence(raw string) (float64, *Error) {
	switch {
	case raw == sentEmpty:
		return 0, invalidParam("min_confidence is empty: give a number from 0 to 1, such as 0.8")
	case len(raw) > maxConfidenceLen:
		return 0, invalidParam("min_confidence is longer than " + strconv.Itoa(maxConfidenceLen) + " characters: give a number from 0 to 1, such as 0.8")
	}
	nonzero, ok := decimalNumber(raw)
	if !ok {
		return 0, invalidParam("min_confidence is not a number: give a decimal number from 0 to 1, such as 0.8")
	}
	v, err := strconv.ParseFloat(raw, 64)
	switch {
	case raw[0] == '-' && nonzero:
		return 0, invalidParam("min_confidence is below 0: give a number from 0 to 1")
	case err != nil || v > 1: // err: out of range, so far above 1
		return 0, invalidParam("min_confidence is above 1: give a number from 0 to 1")
	case v == 0 && nonzero:
		return math.SmallestNonzeroFloat64, nil
	}
	return math.Abs(v), nil // -0 is 0
}

// decimalNumber reports whether s is an optional '-', digits with at most
// one '.' (at least one digit in all), then optionally e or E, a sign and
// digits; and whether any digit before the exponent is not 0.
func decimalNumber(s string) (nonzero, ok bool) {
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			exp = exp[1:]
		}
		if exp == "" || !allDigits(exp) {
			return false, false
		}
	}
	whole, frac, _ := strings.Cut(mant, ".")
	if whole+frac == "" || !allDigits(whole) || !allDigits(frac) {
		return false, false
	}
	return strings.Trim(whole+frac, "0") != "", true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

package api

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/marketdata/marketdata/store"
)

// The fuzz targets' seed corpora live in testdata/fuzz/<target>/. The
// cursor corpus holds tokens signed with cwFuzzSecret for cwFuzzBinding, so
// that the fuzzer starts from accepted cursors and mutates them: a mutation
// that is still accepted must be that same canonical token.

var (
	cwFuzzSecret  = []byte("cw-fuzz-secret")
	cwFuzzBinding = cursorBinding{route: "events", account: "acc_fuzz", filters: "||1"}
)

// FuzzDecodeCursor: decoding never panics, refuses with errBadCursor, and
// accepts only the exact token encodeCursor writes for the id; and every
// valid id survives encode then decode.
func FuzzDecodeCursor(f *testing.F) {
	for _, id := range []string{"a", "ab", "abc", "Z-_9", strings.Repeat("z", 64)} {
		f.Add(encodeCursor(cwFuzzSecret, cwFuzzBinding, id), id)
	}
	f.Add("!!!", "")
	f.Add("", "a b")
	f.Fuzz(func(t *testing.T, token, id string) {
		got, err := decodeCursor(cwFuzzSecret, cwFuzzBinding, token)
		if err != nil {
			if !errors.Is(err, errBadCursor) || got != "" {
				t.Fatalf("decodeCursor(%q) = %q, %v; want \"\", errBadCursor", token, got, err)
			}
		} else {
			if !store.ValidID(got) {
				t.Fatalf("decodeCursor(%q) accepted the malformed id %q", token, got)
			}
			if enc := encodeCursor(cwFuzzSecret, cwFuzzBinding, got); enc != token {
				t.Fatalf("decodeCursor accepted %q for id %q; the cursor for that id is %q", token, got, enc)
			}
		}
		if !store.ValidID(id) {
			return
		}
		c := encodeCursor(cwFuzzSecret, cwFuzzBinding, id)
		back, err := decodeCursor(cwFuzzSecret, cwFuzzBinding, c)
		if err != nil || back != id {
			t.Fatalf("decode(encode(%q)) = %q, %v", id, back, err)
		}
		other := cwFuzzBinding
		other.account += "x"
		if _, err := decodeCursor(cwFuzzSecret, other, c); err == nil {
			t.Fatalf("cursor for %q accepted for another account", id)
		}
	})
}

// cwRefIDs is an independent statement of the ids rule: comma-separated
// [A-Za-z0-9_-]{1,64}, 1–50 distinct, first occurrences in order, the raw
// text at most 64 KiB.
func cwRefIDs(raw string) ([]string, bool) {
	if raw == "" || len(raw) > 64*1024 {
		return nil, false
	}
	var out []string
	for _, p := range strings.Split(raw, ",") {
		if len(p) < 1 || len(p) > 64 || strings.Trim(p, cwAlphabet) != "" {
			return nil, false
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, len(out) <= MaxSnapshotIDs
}

func FuzzParseIDs(f *testing.F) {
	f.Add("a,b,a")
	f.Add("a,,b")
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := parseIDs(raw)
		want, ok := cwRefIDs(raw)
		if err != nil {
			if err.Kind != KindInvalidRequest || got != nil {
				t.Fatalf("parseIDs(%q) = %q, kind %v; want nil, KindInvalidRequest", raw, got, err.Kind)
			}
			if ok {
				t.Fatalf("parseIDs(%q) refused (%s); the contract accepts it as %q", raw, err.Message, want)
			}
			return
		}
		if !ok {
			t.Fatalf("parseIDs(%q) accepted %q; the contract refuses it", raw, got)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("parseIDs(%q) = %q, want %q", raw, got, want)
		}
		if len(got) < 1 || len(got) > MaxSnapshotIDs {
			t.Fatalf("parseIDs(%q): %d ids, want 1 to 50", raw, len(got))
		}
	})
}

func FuzzParseListQuery(f *testing.F) {
	f.Add("7", "politics", "venue_a", "3", "cursor", "0.8", "identity")
	f.Add("", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, limit, category, venue, minVenues, cursor, minConfidence, relation string) {
		q, err := parseListQuery(limit, category, venue, minVenues, minConfidence, relation, cursor)
		okLimit := limit == "" || cwDecimal(limit, 1, 100)
		okCategory := category == "" || (len(category) <= 32 && strings.Trim(category, "abcdefghijklmnopqrstuvwxyz0123456789-") == "")
		okVenue := venue == "" || slices.Contains(store.Venues[:], venue)
		okMin := minVenues == "" || cwDecimal(minVenues, 1, 4)
		wantMatch, okMatch := cwMatchFilter(minConfidence, relation)
		if err != nil {
			if err.Kind != KindInvalidRequest {
				t.Fatalf("parseListQuery refused with kind %v, want KindInvalidRequest", err.Kind)
			}
			if okLimit && okCategory && okVenue && okMin && okMatch {
				t.Fatalf("parseListQuery(%q, %q, %q, %q, %q, %q) refused (%s); the contract accepts it", limit, category, venue, minVenues, minConfidence, relation, err.Message)
			}
			return
		}
		if !(okLimit && okCategory && okVenue && okMin && okMatch) {
			t.Fatalf("parseListQuery(%q, %q, %q, %q, %q, %q) = %+v; the contract refuses it", limit, category, venue, minVenues, minConfidence, relation, q)
		}
		cwCheckMatchFilter(t, minConfidence, relation, q.filter.MatchFilter, wantMatch)
		// The match filters bind the cursor only when they filter.
		plain := q.filter
		plain.MatchFilter = store.MatchFilter{}
		if q.filter.MatchFilter.Active() == (filterKey(q.filter) == filterKey(plain)) {
			t.Fatalf("filterKey(%+v) = %q, without the match filters %q", q.filter, filterKey(q.filter), filterKey(plain))
		}
		if q.limit < 1 || q.limit > 100 || (limit == "" && q.limit != 50) {
			t.Fatalf("limit %q parsed as %d", limit, q.limit)
		}
		if q.filter.Category != category || q.filter.Venue != venue || q.cursor != cursor {
			t.Fatalf("parseListQuery kept %+v from (%q, %q, %q)", q, category, venue, cursor)
		}
		if q.filter.MinVenues < 0 || q.filter.MinVenues > 4 || (minVenues == "") != (q.filter.MinVenues == 0) {
			t.Fatalf("min_venues %q parsed as %d", minVenues, q.filter.MinVenues)
		}
		// The canonical filter: min_venues absent, 1 and 2 are one filter.
		same := q.filter
		same.MinVenues = 0
		if (q.filter.MinVenues <= 2) != (filterKey(q.filter) == filterKey(same)) {
			t.Fatalf("filterKey(%+v) = %q, filterKey without min_venues = %q", q.filter, filterKey(q.filter), filterKey(same))
		}
	})
}

// cwDecimal reports whether s is plain decimal digits for a value in [lo, hi].
func cwDecimal(s string, lo, hi int) bool {
	if s == "" || len(s) > 6 || strings.Trim(s, "0123456789") != "" {
		return false
	}
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n >= lo && n <= hi
}

func FuzzParseSearch(f *testing.F) {
	f.Add("fed", "", "", "")
	f.Add(strings.Repeat("é", 101), "50", "1", "identity")
	f.Fuzz(func(t *testing.T, q, limit, minConfidence, relation string) {
		sq, err := parseSearch(q, limit, minConfidence, relation)
		okQ := utf8.ValidString(q) && utf8.RuneCountInString(q) <= MaxQueryLen
		okLimit := limit == "" || cwDecimal(limit, 1, 50)
		wantMatch, okMatch := cwMatchFilter(minConfidence, relation)
		if err != nil {
			if err.Kind != KindInvalidRequest || sq != (searchQuery{}) {
				t.Fatalf("parseSearch(%q, %q, %q, %q) = %+v, kind %v", q, limit, minConfidence, relation, sq, err.Kind)
			}
			if okQ && okLimit && okMatch {
				t.Fatalf("parseSearch(%q, %q, %q, %q) refused (%s); the contract accepts it", q, limit, minConfidence, relation, err.Message)
			}
			return
		}
		if !okQ || !okLimit || !okMatch {
			t.Fatalf("parseSearch(%q, %q, %q, %q) accepted; the contract refuses it", q, limit, minConfidence, relation)
		}
		if sq.q != q || sq.limit < 1 || sq.limit > 50 || (limit == "" && sq.limit != 20) {
			t.Fatalf("parseSearch(%q, %q) = %q, %d", q, limit, sq.q, sq.limit)
		}
		cwCheckMatchFilter(t, minConfidence, relation, sq.filter, wantMatch)
	})
}

// FuzzSeenPosition: reading an If-None-Match header never panics and never
// names a negative position; a tag the snapshot route made names its
// position, alone or in a list with others, weak or not.
func FuzzSeenPosition(f *testing.F) {
	f.Add(`"3f2k1-1795778905430421"`, int64(1795778905430421))
	f.Add(`W/"abc-7", "zz-9"`, int64(1))
	f.Add(`*`, int64(5))
	f.Add(`"--"`, int64(0))
	f.Add(`"x-99999999999999999999"`, int64(42))
	f.Fuzz(func(t *testing.T, header string, pos int64) {
		if got := seenPosition(header); got < 0 {
			t.Fatalf("seenPosition(%q) = %d", header, got)
		}
		if pos <= 0 {
			return
		}
		tag := `"abc-` + strconv.FormatInt(pos, 10) + `"`
		if got := seenPosition(tag); got != pos {
			t.Fatalf("seenPosition(%q) = %d, want %d", tag, got, pos)
		}
		if got := seenPosition("W/" + tag + ", " + header); got < pos {
			t.Fatalf("seenPosition of a list holding %q = %d, want at least %d", tag, got, pos)
		}
	})
}

package api

import (
	"hash/maphash"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/marketdata/marketdata/store"
)

// Query parsing for the data routes. Every parser refuses rather than
// clamps: out of range, not an integer, unknown values and malformed ids
// are 422 invalid_request with a message naming the parameter.

// MaxSnapshotIDs is how many distinct market ids a snapshot takes.
const MaxSnapshotIDs = 50

// MaxQueryLen is the longest search text, in characters.
const MaxQueryLen = 100

func invalidParam(msg string) *Error { return fail(KindInvalidRequest, msg) }

// parseLimit reads a limit: absent means def; otherwise a decimal integer in
// [1, max].
func parseLimit(raw string, def, max int) (int, *Error) {
	if raw == "" {
		return def, nil
	}
	n, ok := parseSmallInt(raw)
	if !ok || n < 1 || n > max {
		return 0, invalidParam("limit must be an integer from 1 to " + strconv.Itoa(max))
	}
	return n, nil
}

// parseSmallInt reads up to 6 decimal digits, nothing else (no sign, no
// spaces, no exponent).
func parseSmallInt(s string) (int, bool) {
	if s == "" || len(s) > 6 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// parseIDs reads the snapshot's ids: comma-separated universal ids, 1 to 50
// after removing duplicates, in request order. The ids are copied: Fiber's
// query strings are reused after the handler.
func parseIDs(raw string) ([]string, *Error) {
	if raw == "" {
		return nil, invalidParam("ids is required: 1 to 50 comma-separated market ids")
	}
	// 50 ids of 64 characters and their commas, and a little slack for
	// duplicates; anything longer cannot be valid after de-duplication
	// without being absurd.
	if len(raw) > 64*1024 {
		return nil, invalidParam("ids is too long")
	}
	// One copy of the whole list; the ids are slices of it. This runs for
	// every snapshot poll: no per-id allocation, and duplicates found in a
	// small open-addressing table on the stack (at most 51 distinct ids
	// ever go in: the 51st is refused).
	raw = strings.Clone(raw)
	ids := make([]string, 0, min(strings.Count(raw, ",")+1, MaxSnapshotIDs+1))
	var seen [128]uint8 // index+1 into ids; 0 is an empty slot
	for start := 0; start <= len(raw); {
		end := strings.IndexByte(raw[start:], ',')
		if end < 0 {
			end = len(raw)
		} else {
			end += start
		}
		part := raw[start:end]
		start = end + 1
		if !store.ValidID(part) {
			return nil, invalidParam("ids holds a malformed market id " + strconv.Quote(truncated(part)) + ": ids match " + store.IDPattern)
		}
		for j := int(maphash.String(idSeed, part) & uint64(len(seen)-1)); ; j = (j + 1) & (len(seen) - 1) {
			if k := seen[j]; k == 0 {
				seen[j] = uint8(len(ids) + 1)
				ids = append(ids, part)
				break
			} else if ids[k-1] == part {
				break
			}
		}
		if len(ids) > MaxSnapshotIDs {
			return nil, invalidParam("ids holds more than 50 distinct market ids")
		}
	}
	return ids, nil
}

// idSeed hashes snapshot ids for de-duplication.
var idSeed = maphash.MakeSeed()

func truncated(s string) string {
	if len(s) > 70 {
		return s[:70] + "…"
	}
	return s
}

// listQuery is the parsed query of GET /events.
type listQuery struct {
	filter store.ListFilter
	limit  int
	cursor string
}

// parseListQuery reads limit, category, venue, min_venues, min_confidence
// and relation.
func parseListQuery(limit, category, venue, minVenues, minConfidence, relation, cursor string) (listQuery, *Error) {
	var q listQuery
	var err *Error
	if q.limit, err = parseLimit(limit, 50, 100); err != nil {
		return q, err
	}
	if category != "" {
		if !store.ValidCategory(category) {
			return q, invalidParam("category must match " + store.CategoryPattern)
		}
		q.filter.Category = strings.Clone(category)
	}
	if venue != "" {
		if store.VenueIndex(venue) < 0 {
			return q, invalidParam("venue must be one of venue_a, venue_b, venue_c, venue_d")
		}
		q.filter.Venue = strings.Clone(venue)
	}
	if minVenues != "" {
		n, ok := parseSmallInt(minVenues)
		if !ok || n < 1 || n > 4 {
			return q, invalidParam("min_venues must be an integer from 1 to 4")
		}
		q.filter.MinVenues = n
	}
	if q.filter.MatchFilter, err = parseMatchFilter(minConfidence, relation); err != nil {
		return q, err
	}
	q.cursor = strings.Clone(cursor)
	return q, nil
}

// searchQuery is the parsed query of GET /markets/search.
type searchQuery struct {
	q      string
	limit  int
	filter store.MatchFilter
}

// parseSearch reads q (at most 100 characters, valid UTF-8), limit,
// min_confidence and relation.
func parseSearch(q, limit, minConfidence, relation string) (searchQuery, *Error) {
	if !utf8.ValidString(q) {
		return searchQuery{}, invalidParam("q must be UTF-8 text")
	}
	if utf8.RuneCountInString(q) > MaxQueryLen {
		return searchQuery{}, invalidParam("q must be at most 100 characters")
	}
	n, err := parseLimit(limit, 20, 50)
	if err != nil {
		return searchQuery{}, err
	}
	f, err := parseMatchFilter(minConfidence, relation)
	if err != nil {
		return searchQuery{}, err
	}
	return searchQuery{q: strings.Clone(q), limit: n, filter: f}, nil
}

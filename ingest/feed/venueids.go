package feed

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/marketdata/marketdata/store"
)

// Venue positions, in store.Venues order.
const (
	venueA = iota // Kalshi-like tickers: KXFEDCUT-27MAR, KXFEDCUT-27MAR-CUT25BPS
	venueB        // Polymarket-like slugs: will-the-fed-cut-rates-in-march-2027
	venueC        // numeric ids: 1839274
	venueD        // hex ids: 0x3f9a0c…
)

// maxIDLen is the longest id the contract allows.
const maxIDLen = store.MaxIDLen

// venueIDs hands out ids shaped like each venue's own, unique per venue.
type venueIDs struct {
	r    *rand.Rand
	used [4]map[string]bool
}

func newVenueIDs(r *rand.Rand) *venueIDs {
	v := &venueIDs{r: r}
	for i := range v.used {
		v.used[i] = make(map[string]bool)
	}
	return v
}

// event returns the event's id on venue v.
func (v *venueIDs) event(venue int, d draft) string {
	switch venue {
	case venueA:
		return v.claim(venue, "KX"+d.stem+"-"+d.code)
	case venueB:
		return v.claim(venue, Slugify(d.title, maxIDLen-4))
	case venueC:
		return v.numeric(venue, 1_000_000, 9_000_000)
	default:
		return v.hex(venue, 12)
	}
}

// market returns the id on venue v of the market labelled label, within the
// event whose id on that venue is eventID.
func (v *venueIDs) market(venue int, eventID, label string) string {
	switch venue {
	case venueA:
		return v.claim(venue, eventID+"-"+tickerCode(label))
	case venueB:
		ls := Slugify(label, 24)
		return v.claim(venue, Slugify(eventID, maxIDLen-4-1-len(ls))+"-"+ls)
	case venueC:
		return v.numeric(venue, 100_000, 900_000)
	default:
		return v.hex(venue, 16)
	}
}

// claim reserves id on the venue, adding a numeric suffix when it is taken.
func (v *venueIDs) claim(venue int, id string) string {
	id = cut(id, maxIDLen)
	cand := id
	for k := 2; v.used[venue][cand]; k++ {
		suffix := "-" + strconv.Itoa(k)
		cand = strings.TrimRight(cut(id, maxIDLen-len(suffix)), "-") + suffix
	}
	v.used[venue][cand] = true
	return cand
}

// numeric draws an unused decimal id in [lo, lo+span).
func (v *venueIDs) numeric(venue, lo, span int) string {
	for {
		id := strconv.Itoa(lo + v.r.IntN(span))
		if !v.used[venue][id] {
			v.used[venue][id] = true
			return id
		}
	}
}

// hex draws an unused "0x" id of n random bytes, like a truncated hash.
func (v *venueIDs) hex(venue, n int) string {
	for {
		var b strings.Builder
		b.WriteString("0x")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "%02x", v.r.IntN(256))
		}
		id := b.String()
		if !v.used[venue][id] {
			v.used[venue][id] = true
			return id
		}
	}
}

// Slugify lowercases s and joins its words with '-', dropping everything but
// ASCII letters and digits, and shortens it to at most max bytes at a word
// boundary.
func Slugify(s string, max int) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(c)
		case c == ',', c == '\'', c == '$', c == '%':
			// "95,000" → "95000", "don't" → "dont"
		default:
			dash = true
		}
	}
	out := b.String()
	if len(out) > max {
		boundary := out[max] == '-'
		out = out[:max]
		if i := strings.LastIndexByte(out, '-'); !boundary && i > 0 {
			out = out[:i]
		}
	}
	if out == "" {
		out = "market"
	}
	return out
}

// tickerCode is a venue_a market suffix: the label's letters and digits in
// upper case, at most 12 of them.
func tickerCode(label string) string {
	var b strings.Builder
	for _, c := range strings.ToUpper(label) {
		if (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		}
	}
	code := cut(b.String(), 12)
	if code == "" {
		code = "M"
	}
	return code
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

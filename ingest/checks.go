package ingest

import (
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/marketdata/marketdata/store"
)

// Text limits of contract §4, in characters: Unicode code points (runes), not
// bytes, so a title of 300 characters in any script is accepted (up to 1,200
// bytes of UTF-8) and answers stay small.
const (
	MaxTitleChars  = 300
	MaxResultChars = 64
)

// rfc3339Pattern is the shape of an RFC 3339 date-time. time.Parse alone also
// accepts a one-digit hour, a comma before the fraction and the offsets
// +24:00 or +23:60 (go.dev/issue/54580), none of which is RFC 3339.
var rfc3339Pattern = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`)

// The checks of the kinds' tables (message.go), each a check[T, D]: it
// validates a value the body carries and stores it in dst. The ...Ref ones
// keep an optional value as a pointer.

// id is a value matching store.IDPattern.
func id(name string, v, dst *string) error {
	if err := checkID(name, *v); err != nil {
		return err
	}
	*dst = *v
	return nil
}

// idRef is an optional id.
func idRef(name string, v *string, dst **string) error {
	if err := checkID(name, *v); err != nil {
		return err
	}
	*dst = v
	return nil
}

// subjectID is the id of the entity the subject names.
func subjectID(subject string) check[string, string] {
	return func(name string, v, dst *string) error {
		if err := checkID(name, *v); err != nil {
			return err
		}
		if *v != subject {
			return invalid(ReasonSubject, "%s %q differs from the subject's id %q", name, truncate(*v), subject)
		}
		*dst = *v
		return nil
	}
}

// version is a version number, 1 or above.
func version(name string, v, dst *int64) error {
	if *v < 1 {
		return invalid(ReasonInvalidVersion, "%s %d is below 1", name, *v)
	}
	*dst = *v
	return nil
}

// title and result are free text of at most their limit of characters; a nil
// dst checks the text only.
var (
	title  = text(MaxTitleChars)
	result = text(MaxResultChars)
)

func text(limit int) check[string, string] {
	return func(name string, v, dst *string) error {
		// Postgres text cannot hold a NUL: such a message could never be
		// stored and would otherwise be retried forever.
		if strings.IndexByte(*v, 0) >= 0 {
			return invalid(ReasonInvalidField, "%s contains a NUL character", name)
		}
		// JSON decoding has already turned invalid UTF-8 into U+FFFD, one
		// rune each; at most len bytes hold at most len runes.
		if len(*v) > limit {
			if n := utf8.RuneCountInString(*v); n > limit {
				return invalid(ReasonTextTooLong, "%s has %d characters, over the limit of %d (characters are Unicode code points, not bytes)", name, n, limit)
			}
		}
		if dst != nil {
			*dst = *v
		}
		return nil
	}
}

// keep stores an optional text that another row has checked.
func keep(_ string, v *string, dst **string) error {
	*dst = v
	return nil
}

// category is an event category matching store.CategoryPattern.
func category(name string, v, dst *string) error {
	if !store.ValidCategory(*v) {
		return invalid(ReasonInvalidCategory, "%s %q does not match %s", name, truncate(*v), store.CategoryPattern)
	}
	*dst = *v
	return nil
}

// The closed sets of words.
var (
	eventStatus  = oneOf(ReasonInvalidStatus, store.StatusActive, store.StatusResolved, store.StatusMerged)
	marketStatus = oneOf(ReasonInvalidStatus, store.StatusActive, store.StatusResolved)
	side         = oneOf(ReasonInvalidSide, "buy", "sell")
)

// oneOf is one of values, refused with code otherwise.
func oneOf(code string, values ...string) check[string, string] {
	want := strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
	return func(name string, v, dst *string) error {
		if !slices.Contains(values, *v) {
			return invalid(code, "%s %q is not %s", name, truncate(*v), want)
		}
		*dst = *v
		return nil
	}
}

// venue is one of store.Venues.
func venue(_ string, v, dst *string) error {
	if err := checkVenue(*v); err != nil {
		return err
	}
	*dst = *v
	return nil
}

// unit is a price, in [0,1].
func unit(name string, v, dst *float64) error {
	if err := checkUnit(name, *v); err != nil {
		return err
	}
	*dst = plusZero(*v)
	return nil
}

// volume is a traded amount, 0 or above.
func volume(name string, v, dst *float64) error {
	if err := checkVolume(name, *v); err != nil {
		return err
	}
	*dst = plusZero(*v)
	return nil
}

// size is a trade's size, above 0.
func size(name string, v, dst *float64) error {
	if math.IsNaN(*v) || *v <= 0 {
		return invalid(ReasonInvalidSize, "%s %v is not above 0", name, *v)
	}
	*dst = *v
	return nil
}

// timestamp is an RFC 3339 time.
func timestamp(name string, v *string, dst *time.Time) error {
	t, err := parseTime(name, *v)
	if err != nil {
		return err
	}
	*dst = t
	return nil
}

// timestampRef is an optional RFC 3339 time.
func timestampRef(name string, v *string, dst **time.Time) error {
	t, err := parseTime(name, *v)
	if err != nil {
		return err
	}
	*dst = &t
	return nil
}

// venueIDs is a market's venue → id map.
func venueIDs(name string, v, dst *map[string]string) error {
	for venue, id := range *v {
		if err := checkVenue(venue); err != nil {
			return err
		}
		if err := checkID(name+"."+venue, id); err != nil {
			return err
		}
	}
	*dst = *v
	return nil
}

// quotes is a price's venue → quote map, a full replacement of the book.
func quotes(name string, v *map[string]QuoteMsg, dst *map[string]store.Quote) error {
	out := make(map[string]store.Quote, len(*v))
	for venue, q := range *v {
		if err := checkVenue(venue); err != nil {
			return err
		}
		// The reason's name is built only for a reason: a price message
		// is the hot path.
		for _, f := range []struct {
			name string
			v    *float64
		}{{"bid", q.Bid}, {"ask", q.Ask}, {"last", q.Last}} {
			if f.v != nil && !inUnit(*f.v) {
				return checkUnit(name+"."+venue+"."+f.name, *f.v)
			}
		}
		if q.Volume24h == nil {
			return invalid(ReasonMissingField, "%s.%s.volume_24h", name, venue)
		}
		if !nonNegative(*q.Volume24h) {
			return checkVolume(name+"."+venue+".volume_24h", *q.Volume24h)
		}
		out[venue] = store.Quote{Bid: plusZeroPtr(q.Bid), Ask: plusZeroPtr(q.Ask), Last: plusZeroPtr(q.Last), Volume24h: plusZero(*q.Volume24h)}
	}
	*dst = out
	return nil
}

// relation is a match's relation, one of store.Relations.
var relation = oneOf(ReasonInvalidMatch, store.Relations[:]...)

// method is a match's method: short text.
var method = text(store.MaxMatchMethodLen)

// matches is an event's or market's venue → match metadata. idFields names,
// for each venue, the field holding the message's id there ("" when it has
// none): an entry for a venue without an id is refused. Entries are checked
// in Venues order, so a message with several faults is refused for the same
// one every time.
func matches(idFields [4]string) check[MatchesMsg, store.Matches] {
	return func(name string, v *MatchesMsg, dst *store.Matches) error {
		for _, venue := range slices.Sorted(maps.Keys(*v)) {
			if store.VenueIndex(venue) < 0 {
				return invalid(ReasonInvalidVenue, "%s: unknown venue %q (want venue_a, venue_b, venue_c or venue_d)", name, truncate(venue))
			}
		}
		var out store.Matches
		for i, venue := range store.Venues {
			e := (*v)[venue]
			if e == nil {
				continue // absent or null: no metadata for the venue
			}
			prefix := name + "." + venue
			if idFields[i] == "" {
				return invalid(ReasonInvalidMatch, "%s: an entry for %s, which the message has no id for", prefix, venue)
			}
			m := &store.Match{}
			for _, f := range []struct {
				name string
				set  bool
			}{{"relation", e.Relation != nil}, {"confidence", e.Confidence != nil}, {"method", e.Method != nil}} {
				if !f.set {
					return invalid(ReasonMissingField, "%s.%s", prefix, f.name)
				}
			}
			if err := relation(prefix+".relation", e.Relation, &m.Relation); err != nil {
				return err
			}
			if c := *e.Confidence; !inUnit(c) {
				return invalid(ReasonInvalidMatch, "%s.confidence %v is outside [0,1]", prefix, c)
			}
			m.Confidence = plusZero(*e.Confidence)
			if err := method(prefix+".method", e.Method, &m.Method); err != nil {
				return err
			}
			out[i] = m
		}
		*dst = out
		return nil
	}
}

func checkID(name string, v string) error {
	if !store.ValidID(v) {
		return invalid(ReasonInvalidID, "%s %q does not match %s", name, truncate(v), store.IDPattern)
	}
	return nil
}

func checkVenue(v string) error {
	if store.VenueIndex(v) < 0 {
		return invalid(ReasonInvalidVenue, "unknown venue %q (want venue_a, venue_b, venue_c or venue_d)", truncate(v))
	}
	return nil
}

func inUnit(v float64) bool { return v >= 0 && v <= 1 }

func nonNegative(v float64) bool { return v >= 0 }

func checkUnit(name string, v float64) error {
	if !inUnit(v) {
		return invalid(ReasonPriceRange, "%s %v is outside [0,1]", name, v)
	}
	return nil
}

func checkVolume(name string, v float64) error {
	if !nonNegative(v) {
		return invalid(ReasonInvalidVolume, "%s %v is negative", name, v)
	}
	return nil
}

func parseTime(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !rfc3339Pattern.MatchString(v) {
		return time.Time{}, invalid(ReasonInvalidTime, "%s %q is not RFC 3339", name, truncate(v))
	}
	// Times are served as RFC 3339 in UTC, whose year has four digits: one whose
	// UTC year leaves 0001–9999 could be stored but not served as RFC 3339 (and
	// time.Time.MarshalJSON refuses it); the zero time reads as "unset" in Go.
	t = t.UTC()
	if t.IsZero() || t.Year() < 1 || t.Year() > 9999 {
		return time.Time{}, invalid(ReasonInvalidTime, "%s %q is outside 0001-01-01 to 9999-12-31 in UTC", name, truncate(v))
	}
	// Postgres keeps microseconds: truncate here so that what is stored, what
	// ingest caches and what a rebuild renders are the same instant.
	return t.Truncate(time.Microsecond), nil
}

// plusZero turns -0 into 0: Postgres keeps no negative zero, so what ingest
// caches and what a rebuild renders would differ, and "-0" is no price.
func plusZero(f float64) float64 {
	if f == 0 {
		return 0
	}
	return f
}

func plusZeroPtr(f *float64) *float64 {
	if f == nil || *f != 0 {
		return f
	}
	z := 0.0
	return &z
}

package ingest

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/marketdata/marketdata/store"
)

// decodeCodes are the reject codes Decode may give; ReasonMaxDeliveries is
// the consumer's, never the validator's.
var decodeCodes = []string{
	ReasonBadJSON, ReasonMissingField, ReasonInvalidField, ReasonInvalidVersion, ReasonInvalidID,
	ReasonInvalidCategory, ReasonInvalidStatus, ReasonInvalidSide, ReasonInvalidVenue,
	ReasonPriceRange, ReasonInvalidSize, ReasonInvalidVolume, ReasonInvalidTime, ReasonSubject,
	ReasonTextTooLong, ReasonInvalidMatch,
}

// FuzzDecode checks that Decode never panics and that whatever it accepts
// holds every invariant of contract §4, while whatever it refuses is refused
// with a declared code and no entity. The seeds are the table cases of
// message_test.go plus testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, c := range validCases() {
		f.Add(c.subject, c.data)
	}
	for _, c := range invalidCases() {
		f.Add(c.subject, c.data)
	}
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		u, err := Decode(testPrefix, subject, data)
		if u == nil {
			t.Fatalf("Decode(%q, %q): got a nil update (error %v)", subject, data, err)
		}
		if err != nil {
			checkRefused(t, u, err)
			return
		}
		checkAccepted(t, subject, u)
	})
}

func checkRefused(t *testing.T, u *Update, err error) {
	t.Helper()
	var ie *InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("error: got %v (%T), want *InvalidError", err, err)
	}
	if ie.Code == "" || !slices.Contains(decodeCodes, ie.Code) {
		t.Errorf("code: got %q, want one of %v", ie.Code, decodeCodes)
	}
	if !strings.HasPrefix(err.Error(), ie.Code) {
		t.Errorf("Error(): got %q, want it to start with the code %q", err.Error(), ie.Code)
	}
	if got := entities(u); got != "[]" {
		t.Errorf("entities of a refused message: got %s, want none", got)
	}
	if !slices.Contains([]string{KindEvent, KindMarket, KindPrice, KindTrade, "unknown"}, u.Kind) {
		t.Errorf("Kind of a refused message: got %q, want a kind or \"unknown\"", u.Kind)
	}
}

func checkAccepted(t *testing.T, subject string, u *Update) {
	t.Helper()
	kind, id, err := ParseSubject(testPrefix, subject)
	if err != nil {
		t.Fatalf("accepted a message on subject %q that ParseSubject refuses: %v", subject, err)
	}
	if u.Kind != kind {
		t.Errorf("Kind: got %q, want %q", u.Kind, kind)
	}
	if got, want := entities(u), "["+kind+"]"; got != want {
		t.Fatalf("entities set: got %s, want %s", got, want)
	}
	switch kind {
	case KindEvent:
		e := u.Event
		checkInvariantID(t, "universal_id", e.ID, id)
		checkVersionAbove0(t, e.Version)
		if !isCategory(e.Category) {
			t.Errorf("category: got %q, want %s", e.Category, store.CategoryPattern)
		}
		switch e.Status {
		case store.StatusMerged:
			if e.MergedInto == nil || !isID(*e.MergedInto) {
				t.Errorf("merged_into of a merged event: got %s, want an id", show(e.MergedInto))
			}
		case store.StatusActive, store.StatusResolved:
			if e.MergedInto != nil {
				t.Errorf("merged_into of a %s event: got %q, want nil", e.Status, *e.MergedInto)
			}
		default:
			t.Errorf("status: got %q, want active, resolved or merged", e.Status)
		}
		for i, v := range e.VenueIDs {
			if v != nil && !isID(*v) {
				t.Errorf("%s: got %q, want an id or nil", store.EventVenueFields[i], *v)
			}
		}
		checkNonNegative(t, "volume", e.Volume)
		checkInvariantTime(t, "updated_at", e.UpdatedAt)
		checkChars(t, "title", e.Title, 300)
		checkMatchesInvariants(t, e.Matches, func(i int) bool { return e.VenueIDs[i] != nil })
	case KindMarket:
		m := u.Market
		checkInvariantID(t, "universal_id", m.ID, id)
		checkInvariantID(t, "event_id", m.EventID, "")
		checkVersionAbove0(t, m.Version)
		switch m.Status {
		case store.StatusActive:
			if m.ResolvedAt != nil || m.Result != nil {
				t.Errorf("resolution of an active market: got %v, %s, want nil, nil", m.ResolvedAt, show(m.Result))
			}
		case store.StatusResolved:
			if m.ResolvedAt == nil || m.Result == nil {
				t.Fatalf("resolution of a resolved market: got %v, %s, want both set", m.ResolvedAt, show(m.Result))
			}
			checkInvariantTime(t, "resolved_at", *m.ResolvedAt)
		default:
			t.Errorf("status: got %q, want active or resolved", m.Status)
		}
		checkChars(t, "title", m.Title, 300)
		if m.Result != nil {
			checkChars(t, "result", *m.Result, 64)
		}
		if m.Venues == nil {
			t.Error("venues: got nil, want a map")
		}
		for venue, vid := range m.Venues {
			checkInvariantVenue(t, venue)
			checkInvariantID(t, "venues."+venue, vid, "")
		}
		checkInvariantTime(t, "updated_at", m.UpdatedAt)
		checkMatchesInvariants(t, m.Matches, func(i int) bool { _, ok := m.Venues[store.Venues[i]]; return ok })
	case KindPrice:
		p := u.Price
		checkInvariantID(t, "market_id", p.MarketID, id)
		checkVersionAbove0(t, p.Version)
		checkInvariantTime(t, "ts", p.TS)
		if p.Quotes == nil {
			t.Error("quotes: got nil, want a map")
		}
		for venue, q := range p.Quotes {
			checkInvariantVenue(t, venue)
			for name, v := range map[string]*float64{"bid": q.Bid, "ask": q.Ask, "last": q.Last} {
				if v != nil {
					checkUnitInterval(t, "quotes."+venue+"."+name, *v)
				}
			}
			checkNonNegative(t, "quotes."+venue+".volume_24h", q.Volume24h)
		}
	case KindTrade:
		tr := u.Trade
		checkInvariantID(t, "market_id", tr.MarketID, id)
		checkInvariantID(t, "trade_id", tr.TradeID, "")
		checkInvariantVenue(t, tr.Venue)
		checkUnitInterval(t, "price", tr.Price)
		if !(tr.Size > 0) || math.IsInf(tr.Size, 0) {
			t.Errorf("size: got %v, want a finite number above 0", tr.Size)
		}
		if tr.Side != "buy" && tr.Side != "sell" {
			t.Errorf("side: got %q, want buy or sell", tr.Side)
		}
		checkInvariantTime(t, "ts", tr.TS)
	}
	// Key must not panic on an accepted update and names the subject's entity.
	if key := u.Key(); kind != KindTrade && key != id {
		t.Errorf("Key(): got %q, want the subject's id %q", key, id)
	}
}

// checkChars checks a text's length in characters (runes), the unit of
// contract §4's limits.
func checkChars(t *testing.T, name, v string, limit int) {
	t.Helper()
	if n := utf8.RuneCountInString(v); n > limit {
		t.Errorf("%s: got %d characters, want at most %d", name, n, limit)
	}
}

// idPattern and categoryPattern are the contract's patterns as regexps: an
// oracle independent of the validator's byte loops (store.ValidID,
// store.ValidCategory).
var (
	idPattern       = regexp.MustCompile(`^` + store.IDPattern + `$`)
	categoryPattern = regexp.MustCompile(`^` + store.CategoryPattern + `$`)
)

// isID reports whether s matches the id pattern.
func isID(s string) bool { return idPattern.MatchString(s) }

// isCategory reports whether s matches the category pattern.
func isCategory(s string) bool { return categoryPattern.MatchString(s) }

// checkInvariantID checks an id's pattern and, when subjectID is set, that it
// is the subject's id.
func checkInvariantID(t *testing.T, name, got, subjectID string) {
	t.Helper()
	if !isID(got) {
		t.Errorf("%s: got %q, want %s", name, got, store.IDPattern)
	}
	if subjectID != "" && got != subjectID {
		t.Errorf("%s: got %q, want the subject's id %q", name, got, subjectID)
	}
}

func checkVersionAbove0(t *testing.T, v int64) {
	t.Helper()
	if v < 1 {
		t.Errorf("version: got %d, want at least 1", v)
	}
}

func checkInvariantVenue(t *testing.T, v string) {
	t.Helper()
	if !slices.Contains(store.Venues[:], v) {
		t.Errorf("venue: got %q, want one of %v", v, store.Venues)
	}
}

func checkUnitInterval(t *testing.T, name string, v float64) {
	t.Helper()
	if !(v >= 0 && v <= 1) {
		t.Errorf("%s: got %v, want within [0,1]", name, v)
	}
}

func checkNonNegative(t *testing.T, name string, v float64) {
	t.Helper()
	if !(v >= 0) || math.IsInf(v, 0) {
		t.Errorf("%s: got %v, want a finite number at least 0", name, v)
	}
}

// checkInvariantTime checks a time is set, in UTC, and can be served as
// RFC 3339 (which a UTC year beyond 9999 cannot).
func checkInvariantTime(t *testing.T, name string, v time.Time) {
	t.Helper()
	if v.IsZero() {
		t.Errorf("%s: got the zero time", name)
	}
	if v.Location() != time.UTC {
		t.Errorf("%s location: got %v, want UTC", name, v.Location())
	}
	if _, err := json.Marshal(v); err != nil {
		t.Errorf("%s %s: cannot be rendered as JSON: %v", name, v, err)
	}
}

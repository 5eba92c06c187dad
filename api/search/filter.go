package search

import (
	"strconv"

	"github.com/marketdata/marketdata/store"
)

// Filter keeps the events whose venue links pass the match filters of
// /markets/search (contract §3 "Match metadata"); the store's type, so the
// index and the listing decide alike. The zero Filter keeps every event.
type Filter = store.MatchFilter

// filterKey names f in the memo's keys: "" for no filter, and one text per
// distinct filter (the shortest decimal that reads back as the float64).
func filterKey(f Filter) string {
	if !f.Active() {
		return ""
	}
	return strconv.FormatFloat(f.MinConfidence, 'g', -1, 64) + " " + f.Relation
}

// keeps reports whether f keeps the entry.
func keeps(f Filter, e *entry) bool { return f.Passes(e.links) }

// venueKeys name the venues in a summary's matches object, in the order
// of linkFields' venue ids.
var venueKeys = store.Venues

// linkFields are the parts of a summary a Filter reads.
type linkFields struct {
	VenueA  *string               `json:"venue_a_event_ticker"`
	VenueB  *string               `json:"venue_b_event_slug"`
	VenueC  *string               `json:"venue_c_event_id"`
	VenueD  *string               `json:"venue_d_event_id"`
	Matches map[string]*linkMatch `json:"matches"`
}

type linkMatch struct {
	Relation   string   `json:"relation"`
	Confidence *float64 `json:"confidence"`
}

// links summarises a summary's venue links: those of the venue ids it
// holds, each with the metadata its matches object gives that venue (a
// summary cached before matches existed has none: a link without; so has
// an entry without a confidence).
func (s *linkFields) links() store.Links {
	var m store.Matches
	for i, k := range venueKeys {
		if x := s.Matches[k]; x != nil && x.Confidence != nil {
			m[i] = &store.Match{Relation: x.Relation, Confidence: *x.Confidence}
		}
	}
	return store.LinksOf([4]*string{s.VenueA, s.VenueB, s.VenueC, s.VenueD}, &m)
}

package search

import "strconv"

// Filter keeps the events whose venue links pass the match filters of
// /markets/search (contract §3 "Match metadata"): every link at least
// MinConfidence sure, and every link of relation Relation. A link is a
// venue id the event has; one without metadata passes only MinConfidence
// 0 and no Relation. The zero Filter keeps every event.
type Filter struct {
	MinConfidence float64
	Relation      string
}

// active reports whether f keeps fewer events than no filter.
func (f Filter) active() bool { return f.MinConfidence > 0 || f.Relation != "" }

// keeps reports whether f keeps the entry.
func (f Filter) keeps(e *entry) bool {
	return e.links.complete && e.links.least >= f.MinConfidence && (f.Relation == "" || e.links.relation == f.Relation)
}

// key names f in the memo's keys: "" for no filter, and one text per
// distinct filter (the shortest decimal that reads back as the float64).
func (f Filter) key() string {
	if !f.active() {
		return ""
	}
	return strconv.FormatFloat(f.MinConfidence, 'g', -1, 64) + " " + f.Relation
}

// links is what a Filter asks of an entry's venue links.
type links struct {
	// complete: every link has metadata (else the event passes no active
	// filter).
	complete bool
	// least is the least confidence among the links; relation the one
	// they all have, "" when they differ.
	least    float64
	relation string
}

// venueKeys name the venues in a summary's matches object, in the order
// of linkFields' venue ids.
var venueKeys = [...]string{"venue_a", "venue_b", "venue_c", "venue_d"}

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
// summary cached before matches existed has none: a link without).
func (s *linkFields) links() links {
	l := links{complete: true}
	n := 0
	for i, id := range [...]*string{s.VenueA, s.VenueB, s.VenueC, s.VenueD} {
		if id == nil {
			continue
		}
		m := s.Matches[venueKeys[i]]
		if m == nil || m.Confidence == nil {
			return links{}
		}
		c := *m.Confidence
		if n == 0 || c < l.least {
			l.least = c
		}
		if n == 0 {
			l.relation = m.Relation
		} else if m.Relation != l.relation {
			l.relation = ""
		}
		n++
	}
	if n == 0 {
		return links{}
	}
	return l
}

package store

// MatchFilter is the filter /events and /markets/search take on match
// metadata (contract §3 "Match metadata"). An event's venue links are its
// venue ids; each passes when the matcher's metadata for that venue says
// enough. The zero MatchFilter keeps every event.
type MatchFilter struct {
	// MinConfidence keeps the events whose every link has a confidence of
	// at least this. A link without metadata passes only 0, which is no
	// filter at all: every link passes it.
	MinConfidence float64
	// Relation keeps the events whose every link has this relation; ""
	// keeps every event. The API takes only RelationIdentity.
	Relation string
}

// Active reports whether f keeps fewer events than no filter.
func (f MatchFilter) Active() bool { return f.MinConfidence > 0 || f.Relation != "" }

// Links is what a MatchFilter asks of an event's venue links, in a form
// that is cheap to keep beside a listing entry and to test.
type Links struct {
	// Complete is true when every link has metadata. When it is false the
	// event passes no active filter, and the other fields are zero.
	Complete bool
	// MinConfidence is the least confidence among the links.
	MinConfidence float64
	// Relation is the relation every link has; "" when they differ.
	Relation string
}

// Links summarises the event's venue links: those of the venues it has an
// id on (ingest refuses metadata for the others).
func (e *Event) Links() Links { return LinksOf(e.VenueIDs, &e.Matches) }

// LinksOf summarises the links of a document with venue ids ids and
// metadata m (the search index reads both from a cached summary).
func LinksOf(ids [4]*string, m *Matches) Links {
	l := Links{Complete: true}
	n := 0
	for i, id := range ids {
		if id == nil {
			continue
		}
		x := m[i]
		if x == nil {
			return Links{}
		}
		if n == 0 || x.Confidence < l.MinConfidence {
			l.MinConfidence = x.Confidence
		}
		if n == 0 {
			l.Relation = x.Relation
		} else if x.Relation != l.Relation {
			l.Relation = ""
		}
		n++
	}
	if n == 0 {
		return Links{}
	}
	return l
}

// Passes reports whether an event whose links are l passes f.
func (f MatchFilter) Passes(l Links) bool {
	if !f.Active() {
		return true
	}
	return l.Complete && l.MinConfidence >= f.MinConfidence && (f.Relation == "" || l.Relation == f.Relation)
}

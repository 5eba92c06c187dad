package store_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/marketdata/marketdata/store"
)

// linkCase is an event's venue ids (a–d, "" for none) and its metadata.
type linkCase struct {
	name    string
	venues  string // one letter per venue id present
	matches store.Matches
}

func mt(relation string, confidence float64) *store.Match {
	return &store.Match{Relation: relation, Confidence: confidence, Method: "rules"}
}

// linkCases covers the shapes a MatchFilter tells apart: no metadata, some
// links without it, mixed relations, equal confidences at the bounds, and a
// JSON null written by hand is tested in SQL below.
var linkCases = []linkCase{
	{"none", "ab", store.Matches{}},
	{"partial", "abc", store.Matches{mt("identity", 1), mt("identity", 1), nil, nil}},
	{"identity-high", "ab", store.Matches{mt("identity", 0.9), mt("identity", 1), nil, nil}},
	{"identity-zero", "cd", store.Matches{nil, nil, mt("identity", 0), mt("identity", 0.5)}},
	{"mixed", "abd", store.Matches{mt("identity", 0.95), mt("complement", 0.99), nil, mt("identity", 0.97)}},
	{"complements", "bc", store.Matches{nil, mt("complement", 0.8), mt("complement", 0.7), nil}},
	{"exact-half", "ad", store.Matches{mt("identity", 0.5), nil, nil, mt("identity", 0.5)}},
	{"all-one", "abcd", store.Matches{mt("identity", 1), mt("identity", 1), mt("identity", 1), mt("identity", 1)}},
}

func (c linkCase) event(version int64) store.Event {
	e := newEvent(c.name, version)
	e.VenueIDs = [4]*string{}
	for _, l := range c.venues {
		i := int(l - 'a')
		e.VenueIDs[i] = ptr(fmt.Sprintf("%c-%s", l, c.name))
	}
	e.Matches = c.matches
	return e
}

var matchFilters = []store.MatchFilter{
	{}, {MinConfidence: 0.5}, {MinConfidence: 0.9}, {MinConfidence: 0.95}, {MinConfidence: 1},
	{MinConfidence: 5e-324}, {Relation: store.RelationIdentity},
	{MinConfidence: 0.5, Relation: store.RelationIdentity}, {Relation: store.RelationComplement},
}

// TestLinksPasses: the filter's rule on the shapes above, written out.
func TestLinksPasses(t *testing.T) {
	want := map[string][]string{
		"{0 }":           {"all-one", "complements", "exact-half", "identity-high", "identity-zero", "mixed", "none", "partial"},
		"{0.5 }":         {"all-one", "complements", "exact-half", "identity-high", "mixed"},
		"{0.9 }":         {"all-one", "identity-high", "mixed"},
		"{0.95 }":        {"all-one", "mixed"},
		"{1 }":           {"all-one"},
		"{5e-324 }":      {"all-one", "complements", "exact-half", "identity-high", "mixed"},
		"{0 identity}":   {"all-one", "exact-half", "identity-high", "identity-zero"},
		"{0.5 identity}": {"all-one", "exact-half", "identity-high"},
		"{0 complement}": {"complements"},
	}
	for _, f := range matchFilters {
		var got []string
		for _, c := range linkCases {
			e := c.event(1)
			if f.Passes(e.Links()) {
				got = append(got, c.name)
			}
		}
		slices.Sort(got)
		key := fmt.Sprintf("%v", f)
		if !slices.Equal(got, want[key]) {
			t.Errorf("filter %s keeps %q, want %q", key, got, want[key])
		}
	}
	if l := (&store.Event{}).Links(); l.Complete {
		t.Errorf("an event without venue ids: %+v, want incomplete links", l)
	}
	e := linkCases[4].event(1)
	if l := e.Links(); l != (store.Links{Complete: true, MinConfidence: 0.95}) {
		t.Errorf("mixed links: %+v", l)
	}
}

// TestListedEventsMatchFilter: the store's listing (the fallback when Redis
// cannot answer) keeps exactly the events Passes keeps, pages included,
// and a JSON null written by hand counts as a link without metadata.
func TestListedEventsMatchFilter(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	var events []store.Event
	for _, c := range linkCases {
		events = append(events, c.event(1))
	}
	apply(t, s, &store.Batch{Events: events})
	// identity-zero's venue_c made a JSON null: no metadata there.
	if _, err := pool.Exec(t.Context(), `UPDATE events SET matches = '{"venue_c":null,"venue_d":{"relation":"identity","confidence":0.5,"method":"x"}}'::json WHERE universal_id = 'identity-zero'`); err != nil {
		t.Fatal(err)
	}
	// ApplyBatch sorts the batch in place.
	events[slices.IndexFunc(events, func(e store.Event) bool { return e.ID == "identity-zero" })].Matches[2] = nil
	for _, f := range matchFilters {
		var want []string
		for i := range events {
			if f.Passes(events[i].Links()) {
				want = append(want, events[i].ID)
			}
		}
		slices.Sort(want)
		for _, lf := range []store.ListFilter{{MatchFilter: f}, {MatchFilter: f, Venue: "venue_a"}} {
			var got []string
			for after := ""; ; {
				page, err := s.ListedEvents(t.Context(), lf, after, 2)
				if err != nil {
					t.Fatalf("%+v: %v", lf, err)
				}
				for _, e := range page {
					got = append(got, e.ID)
				}
				if len(page) < 2 {
					break
				}
				after = page[len(page)-1].ID
			}
			wantHere := want
			if lf.Venue != "" {
				wantHere = slices.DeleteFunc(slices.Clone(want), func(id string) bool {
					i := slices.IndexFunc(events, func(e store.Event) bool { return e.ID == id })
					return events[i].VenueIDs[0] == nil
				})
			}
			if !slices.Equal(got, wantHere) {
				t.Errorf("%+v: listed %q, want %q", lf, got, wantHere)
			}
		}
	}
}

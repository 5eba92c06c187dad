package client_test

import (
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/marketdata/marketdata/client"
	"github.com/marketdata/marketdata/internal/servicetest"
)

// TestMatchFilters: Events and SearchWith send min_confidence (0 too, when
// set) and relation, and get the events the service keeps; a relation the
// service does not take is its 422.
func TestMatchFilters(t *testing.T) {
	s := startService(t, nil)
	w := s.Seed("f", 6, 1)
	// f-e001 (venues a, b): identity 0.9 and 1; f-e002 (a, b, c): all
	// identity but c; f-e003 (a, b, d): identity 0.6 and 0.7, complement 1; f-e004
	// (a, b, c): identity 1 on all; f-e005 and f-e006: none.
	match := func(rel string, conf float64) servicetest.Match {
		return servicetest.Match{Relation: rel, Confidence: conf, Method: "rules"}
	}
	for i, m := range []map[string]servicetest.Match{
		{"venue_a": match("identity", 0.9), "venue_b": match("identity", 1)},
		{"venue_a": match("identity", 1), "venue_b": match("identity", 1)},
		{"venue_a": match("identity", 0.6), "venue_b": match("complement", 1), "venue_d": match("identity", 0.7)},
		{"venue_a": match("identity", 1), "venue_b": match("identity", 1), "venue_c": match("identity", 1)},
	} {
		e := w.Events[i]
		e.Version, e.UpdatedAt, e.Matches = 0, time.Time{}, m
		s.PutEvent(e)
	}
	key := s.NewKey()
	c, rec := newClient(t, s.URL(), key.Secret)
	ctx := ctxT(t)
	all := []string{"f-e001", "f-e002", "f-e003", "f-e004", "f-e005", "f-e006"}
	for _, tc := range []struct {
		f     client.EventsFilter
		query string
		want  []string
	}{
		{client.EventsFilter{MinConfidence: client.Confidence(0.8)}, "min_confidence=0.8", []string{"f-e001", "f-e004"}},
		{client.EventsFilter{MinConfidence: client.Confidence(0.5), Limit: 1}, "limit=1&min_confidence=0.5", []string{"f-e001", "f-e003", "f-e004"}},
		{client.EventsFilter{Relation: client.RelationIdentity}, "relation=identity", []string{"f-e001", "f-e004"}},
		{client.EventsFilter{MinConfidence: client.Confidence(0.95), Relation: client.RelationIdentity}, "min_confidence=0.95&relation=identity", []string{"f-e004"}},
		{client.EventsFilter{MinConfidence: client.Confidence(0)}, "min_confidence=0", all},
		{client.EventsFilter{}, "", all},
	} {
		var got []string
		for ev, err := range c.Events(ctx, tc.f) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.UniversalID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Events(%s): %q, want %q", tc.query, got, tc.want)
		}
		if queries := rec.takeQueries(); len(queries) == 0 || queries[0] != tc.query {
			t.Errorf("Events(%s) sent %q", tc.query, queries)
		}
	}

	// Search follows a moment after the listing (the index's notices).
	for _, tc := range []struct {
		sq   client.SearchQuery
		want []string
	}{
		{client.SearchQuery{Q: "seeded", MinConfidence: client.Confidence(0.8)}, []string{"f-e001", "f-e004"}},
		{client.SearchQuery{Relation: client.RelationIdentity, Limit: 1}, []string{"f-e001"}},
		{client.SearchQuery{MinConfidence: client.Confidence(0)}, all},
	} {
		var got []string
		for deadline := time.Now().Add(10 * time.Second); ; {
			evs, err := c.SearchWith(ctx, tc.sq)
			if err != nil {
				t.Fatal(err)
			}
			got = got[:0]
			for _, ev := range evs {
				got = append(got, ev.UniversalID)
			}
			if slices.Equal(got, tc.want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond) // polling the index
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("SearchWith(%+v): %q, want %q", tc.sq, got, tc.want)
		}
	}
	rec.takeQueries()
	if _, err := c.SearchWith(ctx, client.SearchQuery{Q: "x y", Limit: 3, MinConfidence: client.Confidence(1e-7), Relation: "identity"}); err != nil {
		t.Fatal(err)
	}
	want := url.Values{"q": {"x y"}, "limit": {"3"}, "min_confidence": {"1e-07"}, "relation": {"identity"}}.Encode()
	if q := rec.takeQueries(); len(q) != 1 || q[0] != want {
		t.Errorf("SearchWith sent %q", q)
	}

	for _, bad := range []client.EventsFilter{{Relation: "complement"}, {MinConfidence: client.Confidence(1.5)}} {
		var errs []error
		for _, err := range c.Events(ctx, bad) {
			errs = append(errs, err)
		}
		var ce *client.Error
		if len(errs) != 1 || !errors.As(errs[0], &ce) || ce.Status != 422 || ce.Code != "invalid_request" {
			t.Errorf("Events(%+v): %v, want one 422 invalid_request", bad, errs)
		}
	}
	if _, err := c.SearchWith(ctx, client.SearchQuery{Relation: "subset"}); err == nil {
		t.Error("SearchWith with relation subset: no error")
	}
}

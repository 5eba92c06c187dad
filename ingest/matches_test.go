package ingest

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/marketdata/marketdata/store"
)

// The matches field of event and market messages (contract §4): its valid
// and invalid cases join the tables of message_test.go, so that they seed
// FuzzDecode too.

func match(relation string, confidence float64, method string) body {
	return body{"relation": relation, "confidence": confidence, "method": method}
}

// eventMatches and marketMatches are valid metadata for the venues of
// eventBody (venue_a, venue_b) and marketBody (venue_a, venue_b).
func eventMatches() body {
	return body{"venue_a": match("identity", 0.97, "rules"), "venue_b": match("complement", 0.5, "manual")}
}

func marketMatches() body {
	return body{"venue_a": match("subset", 0, "model"), "venue_b": match("overlap", 1, "m")}
}

func matchValidCases() []validCase {
	evSubj, mkSubj := subjectOf(KindEvent, "ev-1"), subjectOf(KindMarket, "mk-1")
	event := func(ms store.Matches) *Update {
		u, err := Decode(testPrefix, evSubj, eventBody().json())
		if err != nil {
			panic(err)
		}
		u.Event.Matches = ms
		return u
	}
	market := func(ms store.Matches) *Update {
		u, err := Decode(testPrefix, mkSubj, marketBody().json())
		if err != nil {
			panic(err)
		}
		u.Market.Matches = ms
		return u
	}
	m := func(relation string, confidence float64, method string) *store.Match {
		return &store.Match{Relation: relation, Confidence: confidence, Method: method}
	}
	method32 := strings.Repeat("語", 32)
	return []validCase{
		{"event/matches", evSubj, eventBody().with("matches", eventMatches()).json(),
			event(store.Matches{m("identity", 0.97, "rules"), m("complement", 0.5, "manual"), nil, nil})},
		{"event/matches null", evSubj, eventBody().with("matches", nil).json(), event(store.Matches{})},
		{"event/matches empty", evSubj, eventBody().with("matches", body{}).json(), event(store.Matches{})},
		{"event/matches null entry", evSubj,
			eventBody().with("matches", body{"venue_a": nil, "venue_b": match("superset", 0.25, "model")}).json(),
			event(store.Matches{nil, m("superset", 0.25, "model"), nil, nil})},
		{"event/matches null entry without an id", evSubj, eventBody().with("matches", body{"venue_c": nil}).json(),
			event(store.Matches{})},
		{"event/matches four venues", evSubj,
			eventBody().with("venue_c_event_id", "c-1").with("venue_d_event_id", "d-1").with("matches", body{
				"venue_a": match("identity", 1, "rules"), "venue_b": match("complement", 0, "rules"),
				"venue_c": match("subset", 0.1, "model"), "venue_d": match("overlap", 0.9, ""),
			}).json(),
			func() *Update {
				u := event(store.Matches{m("identity", 1, "rules"), m("complement", 0, "rules"), m("subset", 0.1, "model"), m("overlap", 0.9, "")})
				u.Event.VenueIDs[2], u.Event.VenueIDs[3] = ptr("c-1"), ptr("d-1")
				return u
			}()},
		{"event/matches method of 32 characters, unknown entry fields ignored", evSubj,
			eventBody().with("matches", body{"venue_a": match("identity", 0.5, method32).with("source", "x")}).json(),
			event(store.Matches{m("identity", 0.5, method32), nil, nil, nil})},
		{"market/matches", mkSubj, marketBody().with("matches", marketMatches()).json(),
			market(store.Matches{m("subset", 0, "model"), m("overlap", 1, "m"), nil, nil})},
		{"market/matches null", mkSubj, marketBody().with("matches", nil).json(), market(store.Matches{})},
		{"market/matches one venue", mkSubj,
			marketBody().with("matches", body{"venue_b": match("complement", 0.875, "manual")}).json(),
			market(store.Matches{nil, m("complement", 0.875, "manual"), nil, nil})},
	}
}

func matchInvalidCases() []invalidCase {
	var cs []invalidCase
	add := func(name, subject string, data []byte, code, field string) {
		cs = append(cs, invalidCase{name, subject, data, code, field})
	}
	ev, mk := subjectOf(KindEvent, "ev-1"), subjectOf(KindMarket, "mk-1")
	for _, k := range []struct {
		kind, subject string
		body          func() body
	}{
		{"event", ev, func() body { return eventBody().with("matches", eventMatches()) }},
		{"market", mk, func() body { return marketBody().with("matches", marketMatches()) }},
	} {
		n := k.kind + "/matches "
		for _, v := range []string{"same", "Identity", "", "identity "} {
			add(n+"relation "+show(&v), k.subject, k.body().with("matches.venue_b.relation", v).json(), ReasonInvalidMatch, "matches.venue_b.relation")
		}
		for _, v := range []float64{-0.01, 1.01, 2, -1e-300} {
			add(n+"confidence "+show(&v), k.subject, k.body().with("matches.venue_a.confidence", v).json(), ReasonInvalidMatch, "matches.venue_a.confidence")
		}
		for _, v := range []any{"0.5", true, body{}} {
			add(n+"confidence "+show(&v), k.subject, k.body().with("matches.venue_a.confidence", v).json(), ReasonInvalidField, "matches.venue_a.confidence")
		}
		add(n+"relation a number", k.subject, k.body().with("matches.venue_b.relation", 1).json(), ReasonInvalidField, "matches.venue_b.relation")
		add(n+"method a number", k.subject, k.body().with("matches.venue_b.method", 1).json(), ReasonInvalidField, "matches.venue_b.method")
		for _, f := range []string{"relation", "confidence", "method"} {
			add(n+"missing "+f, k.subject, k.body().without("matches.venue_b."+f).json(), ReasonMissingField, "matches.venue_b."+f)
			add(n+"null "+f, k.subject, k.body().with("matches.venue_b."+f, nil).json(), ReasonMissingField, "matches.venue_b."+f)
		}
		for name, v := range sorted(map[string]string{"33 ASCII": strings.Repeat("m", 33), "33 of 4 bytes": strings.Repeat("😀", 33)}) {
			add(n+"method "+name, k.subject, k.body().with("matches.venue_a.method", v).json(), ReasonTextTooLong, "matches.venue_a.method")
		}
		add(n+"method with a NUL", k.subject, k.body().with("matches.venue_a.method", "a\u0000b").json(), ReasonInvalidField, "matches.venue_a.method")
		for _, v := range []string{"venue_e", "VENUE_A", ""} {
			add(n+"key "+show(&v), k.subject, k.body().with("matches."+v, match("identity", 1, "m")).json(), ReasonInvalidVenue, "matches")
		}
		add(n+"an array", k.subject, k.body().with("matches", []any{1}).json(), ReasonInvalidField, "matches")
		add(n+"a string", k.subject, k.body().with("matches", "identity").json(), ReasonInvalidField, "matches")
		add(n+"entry an array", k.subject, k.body().with("matches.venue_a", []any{}).json(), ReasonInvalidField, "matches.venue_a")
		add(n+"entry a number", k.subject, k.body().with("matches.venue_a", 0.5).json(), ReasonInvalidField, "matches.venue_a")
	}
	add("event/matches entry for a venue without an id", ev,
		eventBody().with("matches", eventMatches().with("venue_c", match("identity", 1, "rules"))).json(), ReasonInvalidMatch, "matches.venue_c")
	add("event/matches entry for a venue whose id was left out", ev,
		eventBody().without("venue_a_event_ticker").with("matches", eventMatches()).json(), ReasonInvalidMatch, "matches.venue_a")
	add("market/matches entry for a venue without an id", mk,
		marketBody().with("matches", marketMatches().with("venue_d", match("identity", 1, "rules"))).json(), ReasonInvalidMatch, "matches.venue_d")
	add("market/matches entry for a venue with no venues at all", mk,
		marketBody().with("venues", body{}).with("matches", marketMatches()).json(), ReasonInvalidMatch, "matches.venue_a")
	// Faults are found in venue order, whatever the order of the object.
	add("market/matches two faults", mk,
		marketBody().with("matches", marketMatches().with("venue_b.relation", "x").with("venue_a.confidence", 5)).json(), ReasonInvalidMatch, "matches.venue_a.confidence")
	return cs
}

func checkMatches(t *testing.T, got, want store.Matches) {
	t.Helper()
	for i := range want {
		checkField(t, "Matches["+store.Venues[i]+"]", show(got[i]), show(want[i]))
	}
}

// checkMatchesInvariants holds what an accepted message's metadata must be:
// entries only where the message has an id, each with a relation of the
// list, a confidence in [0,1] and a method of at most 32 characters.
func checkMatchesInvariants(t *testing.T, ms store.Matches, hasID func(i int) bool) {
	t.Helper()
	for i, m := range ms {
		if m == nil {
			continue
		}
		name := "matches." + store.Venues[i]
		if !hasID(i) {
			t.Errorf("%s: an entry for a venue without an id", name)
		}
		if !slices.Contains(store.Relations[:], m.Relation) {
			t.Errorf("%s.relation: got %q, want one of %v", name, m.Relation, store.Relations)
		}
		checkUnitInterval(t, name+".confidence", m.Confidence)
		if n := utf8.RuneCountInString(m.Method); n > store.MaxMatchMethodLen {
			t.Errorf("%s.method: got %d characters, want at most %d", name, n, store.MaxMatchMethodLen)
		}
	}
}

// TestDecodeMatchesDetail pins the reasons matchers read in the DLQ: each
// names the venue and the field.
func TestDecodeMatchesDetail(t *testing.T) {
	ev := subjectOf(KindEvent, "ev-1")
	for _, c := range []struct {
		data []byte
		want string
	}{
		{eventBody().with("matches", eventMatches().with("venue_b.relation", "same")).json(),
			`invalid_match: matches.venue_b.relation "same" is not identity, complement, subset, superset or overlap`},
		{eventBody().with("matches", eventMatches().with("venue_a.confidence", 1.5)).json(),
			`invalid_match: matches.venue_a.confidence 1.5 is outside [0,1]`},
		{eventBody().with("matches", eventMatches().with("venue_a.confidence", "high")).json(),
			`invalid_field: field matches.venue_a.confidence: expected float64, got JSON string`},
		{eventBody().with("matches", eventMatches().with("venue_c", match("identity", 1, "rules"))).json(),
			`invalid_match: matches.venue_c: an entry for venue_c, which the message has no id for`},
		{eventBody().with("matches", eventMatches().with("venue_x", match("identity", 1, "rules"))).json(),
			`invalid_venue: matches: unknown venue "venue_x" (want venue_a, venue_b, venue_c or venue_d)`},
		{eventBody().with("matches", eventMatches().with("venue_a.method", strings.Repeat("x", 40))).json(),
			`text_too_long: matches.venue_a.method has 40 characters, over the limit of 32 (characters are Unicode code points, not bytes)`},
		{eventBody().with("matches", eventMatches().without("venue_b.method")).json(),
			`missing_field: matches.venue_b.method`},
	} {
		_, err := Decode(testPrefix, ev, c.data)
		if err == nil || err.Error() != c.want {
			t.Errorf("Decode(%s):\n got %v\nwant %s", c.data, err, c.want)
		}
	}
}

// TestDecodeMatchesNegativeZero: a confidence of -0 is stored and served as 0.
func TestDecodeMatchesNegativeZero(t *testing.T) {
	u, err := Decode(testPrefix, subjectOf(KindEvent, "ev-1"), []byte(strings.Replace(string(
		eventBody().with("matches", body{"venue_a": match("identity", 0.5, "m")}).json()), `"confidence":0.5`, `"confidence":-0`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if c := u.Event.Matches[0].Confidence; c != 0 || 1/c < 0 {
		t.Errorf("confidence -0: got %v, want +0", c)
	}
}

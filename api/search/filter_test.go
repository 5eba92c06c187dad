package search

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/store"
)

// TestSummaryLinks: what the index reads of a summary's links, as the
// cache renders them and as it rendered them before matches existed.
func TestSummaryLinks(t *testing.T) {
	x := New(newFakeSummaries(), nil)
	for _, tc := range []struct {
		name, raw string
		want      store.Links
	}{
		{"all identity", `{"universal_id":"e","venue_a_event_ticker":"A","venue_b_event_slug":null,"venue_c_event_id":"c","venue_d_event_id":null,` +
			`"matches":{"venue_a":{"relation":"identity","confidence":0.9,"method":"rules"},"venue_c":{"relation":"identity","confidence":1,"method":"m"}}}`,
			store.Links{Complete: true, MinConfidence: 0.9, Relation: "identity"}},
		{"mixed", `{"universal_id":"e","venue_a_event_ticker":"A","venue_d_event_id":"d",` +
			`"matches":{"venue_a":{"relation":"identity","confidence":0,"method":"rules"},"venue_d":{"relation":"complement","confidence":0.5,"method":"m"}}}`,
			store.Links{Complete: true}},
		{"a null link", `{"universal_id":"e","venue_a_event_ticker":"A","venue_b_event_slug":"b",` +
			`"matches":{"venue_a":{"relation":"identity","confidence":1,"method":"rules"},"venue_b":null}}`, store.Links{}},
		{"a link not in matches", `{"universal_id":"e","venue_a_event_ticker":"A","venue_b_event_slug":"b",` +
			`"matches":{"venue_a":{"relation":"identity","confidence":1,"method":"rules"}}}`, store.Links{}},
		{"no confidence", `{"universal_id":"e","venue_a_event_ticker":"A","matches":{"venue_a":{"relation":"identity"}}}`, store.Links{}},
		{"before matches existed", `{"universal_id":"e","venue_a_event_ticker":"A","venue_b_event_slug":"b"}`, store.Links{}},
		{"no venue", `{"universal_id":"e","matches":{}}`, store.Links{}},
	} {
		it, ok := x.parseSummary("e", []byte(tc.raw))
		if !ok || it.links != tc.want {
			t.Errorf("%s: links %+v (%v), want %+v", tc.name, it.links, ok, tc.want)
		}
	}
}

// TestSearchAnswerMemoByFilter: the memo keys hold the filter: an answer
// rendered for one filter never answers another, nor the unfiltered query.
func TestSearchAnswerMemoByFilter(t *testing.T) {
	src := newFakeSummaries()
	both := refLinks{present: [4]bool{true, true}}
	sure, weak := both, both
	sure.matches = [4]*refMatch{{"identity", 0.9}, {"identity", 1}}
	weak.matches = [4]*refMatch{{"identity", 0.2}, {"complement", 1}}
	src.putLinked("e1", "Rain in Spain", 10, sure)
	src.putLinked("e2", "Rain in Paris", 20, weak)
	src.putLinked("e3", "Rain in Rome", 30, both)
	x := loadedIndex(t, src)
	render := func(items [][]byte) ([]byte, string) {
		body := bytes.Join(items, []byte(","))
		return body, fmt.Sprint(len(items))
	}
	ids := func(body []byte) string {
		var out []string
		for _, id := range []string{"e1", "e2", "e3"} {
			if bytes.Contains(body, []byte(`"universal_id":"`+id+`"`)) {
				out = append(out, id)
			}
		}
		return strings.Join(out, " ")
	}
	for range 2 { // the second round answers from the memos
		for _, tc := range []struct {
			f    Filter
			want string
		}{
			{Filter{}, "e1 e2 e3"}, {Filter{MinConfidence: 0.5}, "e1"}, {Filter{MinConfidence: 0.2}, "e1 e2"},
			{Filter{Relation: "identity"}, "e1"}, {Filter{MinConfidence: 0.95}, ""},
		} {
			for _, q := range []string{"", "rain"} {
				body, _ := x.Answer(q, 20, tc.f, render)
				if got := ids(body); got != tc.want {
					t.Errorf("q %q, filter %+v: %s, want %s", q, tc.f, got, tc.want)
				}
			}
		}
	}
	if got := searchIDs(t, x.SearchFiltered("rain", 20, Filter{MinConfidence: 0.2})); !slices.Equal(got, []string{"e2", "e1"}) {
		t.Errorf("by volume: %q, want [e2 e1]", got)
	}
	// A filter that keeps nothing over many blocks, and a prefix group
	// filled past entries it passes over.
	for i := range 600 {
		src.putLinked(fmt.Sprintf("f%03d", i), fmt.Sprintf("Rain %d", i), float64(i), both)
	}
	if err := x.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := x.SearchFiltered("", 50, Filter{MinConfidence: 0.95}); len(got) != 0 {
		t.Errorf("a filter that keeps nothing: %q", searchIDs(t, got))
	}
	if got := searchIDs(t, x.SearchFiltered("rain", 2, Filter{MinConfidence: 0.1})); !slices.Equal(got, []string{"e2", "e1"}) {
		t.Errorf("rain, limit 2, min_confidence 0.1: %q, want [e2 e1]", got)
	}
}

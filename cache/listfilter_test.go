package cache

import (
	"testing"

	"github.com/marketdata/marketdata/store"
)

// TestPagesHoldingResume: a filtered page that stopped on its scan bound
// covers (after, Resume], the events it skipped included, however few ids
// it shows; one that filled or reached its set's end covers what an
// unfiltered page does.
func TestPagesHoldingResume(t *testing.T) {
	stopped := pageKey{set: "*:*:1", match: "0.5 ", after: "c", count: 3}
	for _, tc := range []struct {
		name string
		k    pageKey
		pg   Page
		ids  []string
		want bool
	}{
		{"skipped id inside", stopped, Page{IDs: []string{"d"}, Resume: "m"}, []string{"h"}, true},
		{"the resume id", stopped, Page{IDs: []string{"d"}, Resume: "m"}, []string{"m"}, true},
		{"above resume", stopped, Page{IDs: []string{"d"}, Resume: "m"}, []string{"ma", "z"}, false},
		{"the start", stopped, Page{IDs: []string{"d"}, Resume: "m"}, []string{"c"}, false},
		{"empty page inside", stopped, Page{Resume: "m"}, []string{"e"}, true},
		{"empty page above", stopped, Page{Resume: "m"}, []string{"n"}, false},
		{"short page: the set's end", stopped, Page{IDs: []string{"d"}}, []string{"zz"}, true},
		{"full page", stopped, Page{IDs: []string{"d", "e", "f"}}, []string{"g"}, false},
	} {
		if got := pagesHolding(tc.ids)(tc.k, tc.pg); got != tc.want {
			t.Errorf("%s: pagesHolding(%q) = %v, want %v", tc.name, tc.ids, got, tc.want)
		}
	}
}

// TestMatchKey: node memory tells filters apart, and holds no filter's
// pages under another's key; an inactive filter is the unfiltered page.
func TestMatchKey(t *testing.T) {
	seen := map[string]store.MatchFilter{}
	for _, f := range []store.MatchFilter{
		{MinConfidence: 0.5}, {MinConfidence: 0.50000000000000001 + 1e-16}, {Relation: "identity"},
		{MinConfidence: 0.5, Relation: "identity"}, {MinConfidence: 1}, {MinConfidence: 5e-324},
	} {
		k := matchKey(f)
		if other, ok := seen[k]; ok || k == "" {
			t.Errorf("matchKey(%+v) = %q, also %+v's", f, k, other)
		}
		seen[k] = f
	}
	if k := matchKey(store.MatchFilter{}); k != "" {
		t.Errorf("matchKey of no filter = %q, want \"\"", k)
	}
	if a, b := pageKeyOf(store.ListFilter{}, "x", 3), pageKeyOf(store.ListFilter{MatchFilter: store.MatchFilter{MinConfidence: 0}}, "x", 3); a != b {
		t.Errorf("min_confidence 0 keys %+v, no filter %+v: want one page", b, a)
	}
}

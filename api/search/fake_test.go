package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// fakeSummaries is a Source over a map, as P{i}:s would hold it.
type fakeSummaries struct {
	mu sync.Mutex
	m  map[string][]byte
	// meta holds what m's summaries say, for the reference answer.
	meta map[string]searchMeta
	// afterRead, when set, runs after Summaries has copied the map and
	// before it returns (to change the source under a Load).
	afterRead func()
	// loads counts the calls of Summaries (full Loads), ofCalls those of
	// SummariesOf (Updates); beforeOf, when set, runs at the start of
	// SummariesOf (to hold an Update up).
	loads, ofCalls int
	beforeOf       func()
	// failOf fails that many SummariesOf calls (Redis unreachable), and
	// failLoads that many Summaries calls.
	failOf, failLoads int
}

type searchMeta struct {
	title  string
	volume float64
	links  refLinks
}

// refLinks are a summary's venue ids (present or not) and the metadata of
// each: nil for none.
type refLinks struct {
	present [4]bool
	matches [4]*refMatch
}

type refMatch struct {
	relation   string
	confidence float64
}

func newFakeSummaries() *fakeSummaries {
	return &fakeSummaries{m: map[string][]byte{}, meta: map[string]searchMeta{}}
}

func (f *fakeSummaries) put(id, title string, volume float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[id] = searchSummary(id, title, volume)
	f.meta[id] = searchMeta{title: title, volume: volume}
}

// putLinked is put with venue ids and match metadata.
func (f *fakeSummaries) putLinked(id, title string, volume float64, l refLinks) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[id] = linkedSummary(id, title, volume, l)
	f.meta[id] = searchMeta{title, volume, l}
}

func (f *fakeSummaries) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, id)
	delete(f.meta, id)
}

func (f *fakeSummaries) Summaries(context.Context) (map[string][]byte, error) {
	f.mu.Lock()
	f.loads++
	if f.failLoads > 0 {
		f.failLoads--
		f.mu.Unlock()
		return nil, errors.New("redis: connection refused")
	}
	out := make(map[string][]byte, len(f.m))
	for id, s := range f.m {
		out[id] = s
	}
	hook := f.afterRead
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return out, nil
}

func (f *fakeSummaries) loadCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loads
}

func (f *fakeSummaries) SummariesOf(_ context.Context, ids []string) (map[string][]byte, error) {
	f.mu.Lock()
	f.ofCalls++
	hook := f.beforeOf
	fail := f.failOf > 0
	if fail {
		f.failOf--
	}
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if fail {
		return nil, errors.New("redis: connection refused")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]byte{}
	for _, id := range ids {
		if s, ok := f.m[id]; ok {
			out[id] = s
		}
	}
	return out, nil
}

// searchSummary renders a summary with the fields search reads (and one it
// does not, to show the bytes are answered untouched).
func searchSummary(id, title string, volume float64) []byte {
	b, err := json.Marshal(map[string]any{"universal_id": id, "title": title, "volume": volume, "status": "active"})
	if err != nil {
		panic(err)
	}
	return b
}

// linkedSummary renders a summary as the cache does: venue ids, and a
// matches object with a key per venue id present, null for one without
// metadata.
func linkedSummary(id, title string, volume float64, l refLinks) []byte {
	s := map[string]any{"universal_id": id, "title": title, "volume": volume, "status": "active"}
	matches := map[string]any{}
	for i, field := range []string{"venue_a_event_ticker", "venue_b_event_slug", "venue_c_event_id", "venue_d_event_id"} {
		s[field] = nil
		if !l.present[i] {
			continue
		}
		venue := fmt.Sprintf("venue_%c", 'a'+i)
		s[field] = venue + "-" + id
		matches[venue] = nil
		if m := l.matches[i]; m != nil {
			matches[venue] = map[string]any{"relation": m.relation, "confidence": m.confidence, "method": "rules"}
		}
	}
	s["matches"] = matches
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}

// searchIDs reads the universal ids of an answer.
func searchIDs(t testing.TB, got [][]byte) []string {
	t.Helper()
	ids := make([]string, len(got))
	for i, raw := range got {
		var s struct {
			UniversalID string `json:"universal_id"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("answer %d: %v: %s", i, err, raw)
		}
		ids[i] = s.UniversalID
	}
	return ids
}

func loadedIndex(t testing.TB, src Source) *Index {
	t.Helper()
	return loadedIndexSized(t, src, defaultBlockSize)
}

// loadedIndexSized loads an index cutting blocks of size (small sizes make
// Updates split and join blocks).
func loadedIndexSized(t testing.TB, src Source, size int) *Index {
	t.Helper()
	x := New(src, nil)
	x.blockSize = size
	if x.Ready() {
		t.Fatal("ready before the first load")
	}
	if err := x.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !x.Ready() {
		t.Fatal("not ready after a load")
	}
	return x
}

type searchCase struct {
	q     string
	limit int
	want  []string
}

func checkSearches(t *testing.T, x *Index, tests []searchCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q limit %d", tt.q, tt.limit), func(t *testing.T) {
			got := searchIDs(t, x.Search(tt.q, tt.limit))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

package world

import (
	"testing"
	"time"
)

// staleSchedule is a schedule of market 0's versions 2..6 and market 1's
// version 2, with publish times (ms since start) for those published.
func staleSchedule(t *testing.T, pubMS map[int]int64) *UpdateSchedule {
	t.Helper()
	markets := []int32{0, 0, 1, 0, 0, 0} // market 0: v2 v3 _ v4 v5 v6; market 1: v2
	i := 0
	s := NewSchedule(time.Now(), 2, len(markets), func() int32 { m := markets[i]; i++; return m })
	for n, at := range pubMS {
		s.Published(n, s.start.Add(time.Duration(at)*time.Millisecond))
	}
	return s
}

func TestAnswerStaleness(t *testing.T) {
	ms := int64(time.Millisecond)
	// Market 0: v2 at 10 ms, v3 at 20, v4 at 30, v5 at 40; v6 never.
	s := staleSchedule(t, map[int]int64{0: 10, 1: 20, 2: 25, 3: 30, 4: 40})
	for _, c := range []struct {
		name   string
		m      int32
		shown  int64
		start  int64 // ms
		wantMS int64
	}{
		{"current: nothing newer published before the start", 0, 5, 100, 0},
		{"shows a version newer than any published before the start", 0, 4, 25, 0},
		{"shows the newest published before the start", 0, 3, 25, 0},
		{"one behind: the newest missing is v4", 0, 3, 35, 5},
		{"several behind: the newest missing is v5, not v3", 0, 2, 50, 10},
		{"the world's version 1 when v2..v5 were out", 0, 1, 60, 20},
		{"an absent version counts as the world's", 0, 0, 60, 20},
		{"published exactly at the start is not before it", 0, 4, 40, 0},
		{"start just after v2: only v2 missing", 0, 1, 11, 1},
		{"a market with one version", 1, 1, 26, 1},
		{"nothing published yet", 1, 2, 5, 0},
		{"shows a version beyond the plan", 0, 9, 100, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := s.AnswerStaleness(c.m, c.shown, c.start*ms)
			if want := c.wantMS * ms; got != want {
				t.Errorf("answerStaleness(m%d, v%d, %d ms) = %v, want %v", c.m, c.shown, c.start, time.Duration(got), time.Duration(want))
			}
		})
	}
}

func TestAnswerStalenessUnpublishedTail(t *testing.T) {
	// Only v2 and v3 of market 0 are out: the search must stop at the
	// first version never published.
	s := staleSchedule(t, map[int]int64{0: 10, 1: 20})
	if got, want := s.AnswerStaleness(0, 1, int64(time.Second)), int64(980*time.Millisecond); got != want {
		t.Errorf("got %v, want %v", time.Duration(got), time.Duration(want))
	}
}

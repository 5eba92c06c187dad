package poll

import (
	"testing"
	"time"

	"github.com/marketdata/marketdata/bench/world"
)

// staleSchedule is a schedule of market 0's versions 2..6 and market 1's
// version 2, with publish times (ms since start) for those published.
func staleSchedule(t *testing.T, pubMS map[int]int64) *world.UpdateSchedule {
	t.Helper()
	markets := []int32{0, 0, 1, 0, 0, 0} // market 0: v2 v3 _ v4 v5 v6; market 1: v2
	i := 0
	s := world.NewSchedule(time.Now(), 2, len(markets), func() int32 { m := markets[i]; i++; return m })
	for n, at := range pubMS {
		s.PubAt[n].Store(at*int64(time.Millisecond) + 1)
	}
	return s
}

func TestAnsweredAndCadence(t *testing.T) {
	ms := int64(time.Millisecond)
	s := staleSchedule(t, map[int]int64{0: 10, 1: 20, 2: 25, 3: 30, 4: 40})
	a := newPollAccount(s, []string{"a"}, 1)
	c := &a.conns[0]
	p := world.NewPollers([][]int32{{0, 1}}, func(m int32) string { return "m" }, []string{"k"})[0]
	// Answer at 50 ms showing market 0 at v3 (v5 missing, 10 ms) and
	// market 1 current; then a 304 at 60 ms confirming the same.
	a.polled(c, p, 50*ms, true)
	a.answered(c, p, 50*ms, []int64{3, 2})
	a.polled(c, p, 60*ms, true)
	a.answered(c, p, 60*ms, []int64{3, 2})
	a.polled(c, p, 85*ms, false) // after the measured part: no cadence
	st, cad := a.answerResult()
	if st.Pairs != 4 || st.Stale != 2 {
		t.Errorf("pairs %d stale %d, want 4 and 2", st.Pairs, st.Stale)
	}
	if st.MaxMS != 20 {
		t.Errorf("max %v ms, want 20", st.MaxMS)
	}
	if st.P50MS != 0 || st.P99MS != 20 {
		t.Errorf("p50/p99 %v/%v ms, want 0/20", st.P50MS, st.P99MS)
	}
	if cad.Count != 1 || cad.MaxMS != 10 {
		t.Errorf("cadence %+v, want one interval of 10 ms", cad)
	}
	if p.LastSent != 85*ms {
		t.Errorf("lastSent %d, want the last request's start", p.LastSent)
	}
}

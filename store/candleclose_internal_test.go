package store

import (
	"testing"
	"time"
)

// TestPointAccOrderAndNulls: the compact state of the Go close keeps the
// first and last point by (ts, version), whatever order they come in (equal
// times decided by the version), a side absent in the first or last point
// absent in the candle, and the extremes over the points that have the side.
func TestPointAccOrderAndNulls(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	var a pointAcc
	a.add(100, 5, nil, f(0.6))
	a.add(100, 3, f(0.40), f(0.62)) // same time, lower version: the first
	a.add(200, 9, f(0.45), nil)
	a.add(200, 7, f(0.47), f(0.55)) // same time, lower version: not the last
	a.add(150, 6, f(0.30), f(0.70))
	s := a.state()
	us := func(p *candlePoint) int64 { return p.ts.UnixMicro() }
	if us(s.first) != 100 || s.first.version != 3 || *s.first.bid != 0.40 || *s.first.ask != 0.62 {
		t.Errorf("first = %d v%d %v/%v, want 100 v3 0.40/0.62", us(s.first), s.first.version, s.first.bid, s.first.ask)
	}
	if us(s.last) != 200 || s.last.version != 9 || *s.last.bid != 0.45 || s.last.ask != nil {
		t.Errorf("last = %d v%d %v/%v, want 200 v9 0.45/nil", us(s.last), s.last.version, s.last.bid, s.last.ask)
	}
	if *s.bidHigh != 0.47 || *s.bidLow != 0.30 || *s.askHigh != 0.70 || *s.askLow != 0.55 {
		t.Errorf("extremes bid %v–%v ask %v–%v, want 0.30–0.47, 0.55–0.70", *s.bidLow, *s.bidHigh, *s.askLow, *s.askHigh)
	}
	if !s.first.ts.Equal(time.UnixMicro(100)) || s.first.ts.Location() != time.UTC {
		t.Errorf("first ts %v, want UTC", s.first.ts)
	}
	var none pointAcc
	none.add(1, 1, nil, nil)
	if s := none.state(); s.first.bid != nil || s.bidHigh != nil || s.askLow != nil {
		t.Errorf("a point with no sides: %+v, want every value absent", s)
	}
	if (&pointAcc{}).state() != nil {
		t.Error("no point: want no state")
	}
}

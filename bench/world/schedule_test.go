package world

import (
	"slices"
	"testing"
	"time"
)

func TestScheduleVersionsAndPublishTimes(t *testing.T) {
	start := time.Now()
	draws := []int32{2, 0, 2, 2, 1, 0}
	i := 0
	s := NewSchedule(start, 3, len(draws), func() int32 { i++; return draws[i-1] })
	if want := []int64{2, 2, 3, 4, 2, 3}; !slices.Equal(s.Version, want) {
		t.Fatalf("versions %v, want %v", s.Version, want)
	}
	if _, ok := s.PubTime(2, 3); ok {
		t.Fatal("version published before Published was called")
	}
	s.Published(2, start.Add(5*time.Millisecond))
	if ns, ok := s.PubTime(2, 3); !ok || ns != int64(5*time.Millisecond) {
		t.Fatalf("pubTime(2, 3) = %d, %v; want 5 ms", ns, ok)
	}
	for _, c := range []struct {
		m int32
		v int64
	}{{2, 1}, {2, 5}, {1, 3}} {
		if _, ok := s.PubTime(c.m, c.v); ok {
			t.Errorf("pubTime(%d, %d) ok for a version never planned", c.m, c.v)
		}
	}
}

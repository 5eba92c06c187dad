package baseline

import (
	"slices"
	"testing"

	"github.com/marketdata/marketdata/bench/measure"
)

// TestMedian: the middle of the rounds, the upper middle of an even count,
// whatever their order, leaving the rounds as they were.
func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{0.8}, 0.8},
		{[]float64{0.9, 0.7, 0.8}, 0.8},
		{[]float64{0.7, 0.95, 0.6, 0.8}, 0.8},
		{[]float64{2, 2, 1}, 2},
	} {
		in := slices.Clone(c.xs)
		if got := Median(in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median reordered its input: %v, was %v", in, c.xs)
		}
	}
}

// TestFailures: failed requests and answers of another status both count.
func TestFailures(t *testing.T) {
	rs := []measure.LoadResult{{Errors: 2, Unexpected: 1}, {}, {Unexpected: 4}}
	if got := Failures(rs); got != 7 {
		t.Errorf("Failures = %d, want 7", got)
	}
}

package edge

import "testing"

// TestFitConns: MD_MAX_CONNS is kept when it fits beside the reserve that
// WarnFileLimit checks, else lowered to what fits, never below 1.
func TestFitConns(t *testing.T) {
	for _, c := range []struct {
		max    int
		nofile uint64
		want   int
	}{
		{20000, 1 << 20, 20000},
		{20000, 20256, 20000},
		{20000, 20255, 19999},
		{20000, 20000, 19744},
		{20000, 1024, 768},
		{20000, 100, 1},
	} {
		if got := FitConns(c.max, c.nofile); got != c.want {
			t.Errorf("FitConns(%d, %d) = %d, want %d", c.max, c.nofile, got, c.want)
		}
	}
}

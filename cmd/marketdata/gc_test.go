package main

import (
	"runtime/debug"
	"testing"
)

// Each command's collector target applies when GOGC is unset; an operator's
// GOGC stays in force.
func TestTuneGC(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func() int
		want int
	}{
		{"api", tuneAPIGC, apiGCPercent},
		{"ingest", tuneIngestGC, ingestGCPercent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := debug.SetGCPercent(100)
			t.Cleanup(func() { debug.SetGCPercent(prev) })

			t.Setenv("GOGC", "")
			if got := tc.tune(); got != tc.want {
				t.Errorf("GOGC unset: percent %d, want %d", got, tc.want)
			}
			if got := debug.SetGCPercent(100); got != tc.want {
				t.Errorf("GOGC unset: runtime at %d, want %d", got, tc.want)
			}

			// The runtime read GOGC at start; an operator's value stays in force.
			t.Setenv("GOGC", "150")
			debug.SetGCPercent(150)
			if got := tc.tune(); got != 150 {
				t.Errorf("GOGC=150: percent %d, want 150 (the operator's)", got)
			}
			if got := debug.SetGCPercent(100); got != 150 {
				t.Errorf("GOGC=150: runtime at %d, want 150", got)
			}
		})
	}
}

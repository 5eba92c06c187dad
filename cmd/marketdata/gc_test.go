package main

import (
	"runtime/debug"
	"testing"
)

func TestTuneAPIGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	t.Setenv("GOGC", "")
	if got := tuneAPIGC(); got != apiGCPercent {
		t.Errorf("GOGC unset: percent %d, want %d", got, apiGCPercent)
	}
	if got := debug.SetGCPercent(100); got != apiGCPercent {
		t.Errorf("GOGC unset: runtime at %d, want %d", got, apiGCPercent)
	}

	// The runtime read GOGC at start; an operator's value stays in force.
	t.Setenv("GOGC", "200")
	debug.SetGCPercent(200)
	if got := tuneAPIGC(); got != 200 {
		t.Errorf("GOGC=200: percent %d, want 200 (the operator's)", got)
	}
	if got := debug.SetGCPercent(100); got != 200 {
		t.Errorf("GOGC=200: runtime at %d, want 200", got)
	}
}

func TestTuneIngestGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	t.Setenv("GOGC", "")
	if got := tuneIngestGC(); got != ingestGCPercent {
		t.Errorf("GOGC unset: percent %d, want %d", got, ingestGCPercent)
	}
	if got := debug.SetGCPercent(100); got != ingestGCPercent {
		t.Errorf("GOGC unset: runtime at %d, want %d", got, ingestGCPercent)
	}
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	if got := tuneIngestGC(); got != 150 {
		t.Errorf("GOGC=150: percent %d, want 150 (the operator's)", got)
	}
}

package main

import (
	"os"
	"runtime/debug"
)

// apiGCPercent is an API node's garbage-collection target when GOGC is not
// set: the heap may grow to 1.5× what is live, not Go's default 2×. A node
// holds the price replica (about 140 MB at 250,000 markets, docs/operations.md)
// and little else that lives long, so at the default a 250,000-market node
// peaked at 532 MB; at 50 it peaked at 358 MB with the same read throughput
// (`mdbench reads`; the goal is ≤ 400 MB, docs/benchmarks.md). GOGC set by the operator
// wins; GOMEMLIMIT, when set, bounds the heap on top of either.
const apiGCPercent = 50

// tuneAPIGC applies apiGCPercent unless the environment sets GOGC, and
// returns the percent in force.
func tuneAPIGC() int {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		old := debug.SetGCPercent(-1)
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(apiGCPercent)
	return apiGCPercent
}

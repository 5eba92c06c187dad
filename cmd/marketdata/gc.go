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

// ingestGCPercent is ingest's target when GOGC is not set: the heap may grow
// to 3× what is live. Ingest allocates for every message (decoding,
// rendering, the batch's arguments) and keeps little: 112 MB live on the
// 250,000-market world, most of it the market rows it keeps projected
// (store.PriceItemMarket). A collection's cost grows with what is live and
// their number with the allocations over the headroom, so the collector's
// share of ingest's CPU (38–40 % at the default) falls with a larger
// target. On that world (`mdbench ingest`, 2026-11-28, docs/benchmarks.md):
// at 200 ingest took 0.36 cores at 5,000 updates a second where the
// default took 0.40–0.46, with a peak RSS of 0.69 GB, what the default
// peaked at before the rows were projected; 400 took 0.32 cores for 1.33
// GB. GOGC set by the operator wins, and GOMEMLIMIT bounds the heap on top.
const ingestGCPercent = 200

// tuneAPIGC applies apiGCPercent unless the environment sets GOGC, and
// returns the percent in force.
func tuneAPIGC() int { return tuneGC(apiGCPercent) }

// tuneIngestGC is tuneAPIGC for ingest (ingestGCPercent).
func tuneIngestGC() int { return tuneGC(ingestGCPercent) }

// tuneGC applies percent unless the environment sets GOGC, and returns the
// percent in force.
func tuneGC(percent int) int {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		old := debug.SetGCPercent(-1)
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(percent)
	return percent
}

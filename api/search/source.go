// Package search is the node's in-memory index of the served active events'
// titles, answering GET /markets/search (contract §3) without a round trip.
// It knows only the summaries it reads (Source); the route that answers from
// it is api's.
package search

import "context"

// Source is what the index reads: the summaries of the served active events
// (cache key P{i}:s). cache.Reader is one.
type Source interface {
	Summaries(ctx context.Context) (map[string][]byte, error)
	SummariesOf(ctx context.Context, ids []string) (map[string][]byte, error)
}

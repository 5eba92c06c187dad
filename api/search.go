package api

import (
	"context"

	"github.com/marketdata/marketdata/cache"
)

// summarySource is what the search index reads: the summaries of the served
// active events (cache key P{i}:s).
type summarySource interface {
	Summaries(ctx context.Context) (map[string][]byte, error)
	SummariesOf(ctx context.Context, ids []string) (map[string][]byte, error)
}

var _ summarySource = (*cache.Reader)(nil)

// Package cachetest reads what a cache wrote, as tests check it: documents,
// trade lists and listing sets as Redis holds them, with none of the
// Reader's node memory, store fallback or completeness check. Production
// reads go through cache.Reader.
package cachetest

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
)

// Event reads an event's document as stored in c (whose client is rdb).
func Event(ctx context.Context, rdb redis.UniversalClient, c *cache.Cache, id string) (cache.EventEntry, error) {
	p := rdb.Pipeline()
	cmd := c.QueueEvent(p, id)
	if _, err := p.Exec(ctx); err != nil {
		return cache.EventEntry{}, fmt.Errorf("cachetest: read event %s: %w", id, err)
	}
	return cache.ParseEvent(cmd)
}

// Trades reads a market's newest trades, newest first.
func Trades(ctx context.Context, rdb redis.UniversalClient, c *cache.Cache, marketID string, limit int) ([][]byte, error) {
	vals, err := rdb.ZRevRange(ctx, c.TradesKey(marketID), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("cachetest: read trades of %s: %w", marketID, err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// ListPage reads up to limit listed events of a set with ids above after
// (bytewise), ascending, with their summaries (nil where an id has none),
// whether or not the listing is complete.
func ListPage(ctx context.Context, rdb redis.UniversalClient, c *cache.Cache, set, after string, limit int) (ids []string, summaries [][]byte, err error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	ids, err = rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: c.SetKey(set), Start: start, Stop: "+", ByLex: true, Count: int64(limit),
	}).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("cachetest: list %s: %w", set, err)
	}
	if len(ids) == 0 {
		return ids, nil, nil
	}
	sums, err := c.SummariesOf(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	summaries = make([][]byte, len(ids))
	for i, id := range ids {
		summaries[i] = sums[id]
	}
	return ids, summaries, nil
}

package cache

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// EventEntry is a cached event document as stored.
type EventEntry struct {
	// Found is false when Redis holds nothing for the event (never written,
	// or evicted): the caller must not take that as "not served".
	Found      bool
	Rev        int64
	Body       []byte
	MergedInto string
}

// MarketEntry is a cached price item as stored.
type MarketEntry struct {
	Found  bool
	Served bool
	Rev    int64
	Body   []byte
	// Seq is the change number of the write that stored it (0: a rebuild's).
	Seq int64
}

// Markets reads the price items of ids, in order, in one round trip.
func (c *Cache) Markets(ctx context.Context, ids []string) ([]MarketEntry, error) {
	p := c.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = c.QueueMarket(p, id)
	}
	if _, err := p.Exec(ctx); err != nil {
		return nil, fmt.Errorf("cache: read %d markets: %w", len(ids), err)
	}
	out := make([]MarketEntry, len(ids))
	for i, cmd := range cmds {
		m, err := ParseMarket(cmd)
		if err != nil {
			return nil, fmt.Errorf("cache: read market %s: %w", ids[i], err)
		}
		out[i] = m
	}
	return out, nil
}

// Summaries reads every listed event's summary (what search ranks).
func (c *Cache) Summaries(ctx context.Context) (map[string][]byte, error) {
	out := map[string][]byte{}
	iter := c.rdb.HScan(ctx, c.listingKey("s"), 0, "", 1000).Iterator()
	var key string
	for i := 0; iter.Next(ctx); i++ {
		if i%2 == 0 {
			key = iter.Val()
		} else {
			out[key] = []byte(iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("cache: read summaries: %w", err)
	}
	return out, nil
}

// SummariesOf reads the summaries of ids (what search re-reads after a change
// notice). An id with no summary — not listed, or no longer — is left out of
// the map.
func (c *Cache) SummariesOf(ctx context.Context, ids []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(ids))
	for chunk := range slices.Chunk(ids, 1000) {
		vals, err := c.rdb.HMGet(ctx, c.listingKey("s"), chunk...).Result()
		if err != nil {
			return nil, fmt.Errorf("cache: read %d summaries: %w", len(chunk), err)
		}
		for i, v := range vals {
			if s, ok := v.(string); ok {
				out[chunk[i]] = []byte(s)
			}
		}
	}
	return out, nil
}

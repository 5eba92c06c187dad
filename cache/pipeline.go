package cache

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Read sends the reads queue adds in one pipeline and returns once Redis
// answered or ctx ended: each command carries its own reply or error (on
// Redis Cluster a shard that did not answer fails only its commands). It is
// how the API's handlers send the reads they queue (QueueEvent, QueueMarket,
// ...) now that the limiter only limits, until the read-through layer owns
// those reads.
func (c *Cache) Read(ctx context.Context, queue func(redis.Pipeliner)) {
	p := c.rdb.Pipeline()
	queue(p)
	p.Exec(ctx) //nolint:errcheck // every command carries its own error
}

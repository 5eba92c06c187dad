package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The change sequence: a counter every cache writer takes a number from
// before it writes (Apply), and names in the change notice it sends after.
// Readers compare Redis's current number with the notices they have applied
// to know whether node memory may answer (see Reader).

// seqKey is the counter's key: a hash slot of its own ({n}), so that taking
// a number is one command on one node.
func (c *Cache) seqKey() string { return c.prefix + "{n}:seq" }

// nextSeq takes the next number. A missing counter (never written, or Redis
// lost its data) starts at Redis's clock in microseconds, not at 1: numbers
// then keep growing across a restart of Redis (writers take far fewer than a
// million a second), so a reader sees a restart as numbers it never got
// notices for, which it handles like lost notices, never as numbers it has
// already applied.
var nextSeq = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[1], t[1] .. string.format('%06d', tonumber(t[2])))
end
return redis.call('INCR', KEYS[1])
`)

// takeSeq takes the next change number, in a round trip of its own: on a
// Redis Cluster the commands of one pipeline that go to different nodes are
// not ordered, and the number must be taken before any document is written.
func (c *Cache) takeSeq(ctx context.Context) (int64, error) {
	seq, err := nextSeq.Run(ctx, c.rdb, []string{c.seqKey()}).Int64()
	if err != nil {
		return 0, fmt.Errorf("cache: take a change number: %w", err)
	}
	return seq, nil
}

// queueSeq queues the read of the current change number.
func (c *Cache) queueSeq(p redis.Pipeliner) *redis.StringCmd {
	return p.Get(context.Background(), c.seqKey())
}

// parseSeq reads a queued change number; a missing counter is 0 (no writer
// has taken one since Redis started empty).
func parseSeq(cmd *redis.StringCmd) (int64, error) {
	n, err := cmd.Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Seq reads the current change number (0 when none was taken).
func (c *Cache) Seq(ctx context.Context) (int64, error) {
	p := c.rdb.Pipeline()
	cmd := c.queueSeq(p)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("cache: read the change number: %w", err)
	}
	return parseSeq(cmd)
}

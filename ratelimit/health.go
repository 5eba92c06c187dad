package ratelimit

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// A slow Redis is not a down Redis. While Redis answers, a limit call waits
// for it up to Config.SlowWait (a saturated machine makes round trips of
// tens or hundreds of milliseconds, and deciding alone then would give
// accounts up to one more limit across the nodes: the limits would not hold
// under overload). Once a call failed for want of Redis — refused, dropped,
// or no answer within SlowWait — Redis counts as down: while Run runs, the
// node then decides alone at once, sending nothing (a Redis that hangs would
// otherwise hold each request for the client's read timeout, 2 s, which a
// context deadline does not shorten), and a probe every probeEvery counts
// Redis up again when every master answers a PING. Without Run (tools,
// tests) calls keep going to Redis with Config.Timeout as their budget, and
// any call Redis answers whole counts it up.

// DefaultSlowWait is how long a limit call waits for a Redis that is up
// (1 s, the reads' wait for a slow Redis).
const DefaultSlowWait = time.Second

// errRedisDown says a decision was made alone because Redis counts as down.
var errRedisDown = errors.New("ratelimit: redis counted down (a call got no reply); deciding alone until a probe answers")

// decideAlone reports whether calls skip Redis: it counts as down and the
// probe runs.
func (l *Limiter) decideAlone() bool { return l.down.Load() && l.running.Load() && !l.leaseOff.Load() }

// probeEvery is how often a Redis counted down is probed.
const probeEvery = 100 * time.Millisecond

// budget is how long a limit call may wait for Redis now.
func (l *Limiter) budget() time.Duration {
	if l.down.Load() {
		return l.cfg.Timeout
	}
	return max(l.cfg.SlowWait, l.cfg.Timeout)
}

// reached records what one call learned of Redis: answered (every command of
// it had a reply, error replies included) counts it up; a command that got
// no reply counts it down.
func (l *Limiter) reached(answered bool) {
	if answered {
		l.down.Store(false)
		return
	}
	if !l.down.Swap(true) {
		l.downs.Add(1)
	}
}

// heardFrom records what a call made within parent learned of Redis from its
// error: nothing when parent ended first (the request went away).
func (l *Limiter) heardFrom(parent context.Context, err error) {
	if parent.Err() == nil {
		l.reached(!unreached(err))
	}
}

// unreached reports whether err means the command got no reply from Redis
// (a transport failure or a timeout; not an error reply, and not nil).
func unreached(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	var re redis.Error
	return !errors.As(err, &re)
}

// watchRedis probes a Redis counted down every probeEvery until ctx ends:
// a PING that every node answers within SlowWait counts it up.
func (l *Limiter) watchRedis(ctx context.Context) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !l.down.Load() {
			continue
		}
		wait := max(l.cfg.SlowWait, l.cfg.Timeout)
		pctx, cancel := context.WithTimeout(ctx, wait)
		began := time.Now()
		err := l.ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		// A reply later than a call would wait (go-redis bounds the read by
		// its read timeout, not the context) does not count Redis up.
		l.reached(!unreached(err) && time.Since(began) <= wait)
	}
}

// ping pings Redis: every master of a Redis Cluster.
func (l *Limiter) ping(ctx context.Context) error {
	if c, ok := l.rdb.(mastersClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return node.Ping(ctx).Err()
		})
	}
	return l.rdb.Ping(ctx).Err()
}

// mastersClient is a Redis Cluster client (*redis.ClusterClient, or a type
// that embeds it, as redisx.Cluster does).
type mastersClient interface {
	ForEachMaster(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
}

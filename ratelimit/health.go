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
// under overload). A call that got no reply within SlowWait — refused,
// dropped, silent, or answered later (go-redis bounds a sent call by its
// read timeout, 2 s, not by the context, so a late reply still decides that
// call) — counts Redis down. While Run runs, the node then decides alone at
// once, sending nothing, and a probe every probeEvery counts Redis up again
// once every master answers a PING within SlowWait; no other call counts it
// up (one round trip may touch only the shards that answer). Without Run
// (tools, tests) calls keep going to Redis with Config.Timeout as their
// budget, and a call Redis answers whole and in time counts it up.

// DefaultSlowWait is how long a limit call waits for a Redis that is up
// (1 s, the reads' wait for a slow Redis).
const DefaultSlowWait = time.Second

// errRedisDown says a decision was made alone because Redis counts as down.
var errRedisDown = errors.New("ratelimit: redis counted down (a call got no reply); deciding alone until a probe answers")

// decideAlone reports whether calls skip Redis: it counts as down and the
// probe runs.
func (l *Limiter) decideAlone() bool { return l.down.Load() && l.probing() }

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
// it had a reply within the slow wait, error replies included) or not. A
// call that got no reply in time counts Redis down. One that did counts it
// up only while no probe runs (without Run): with Run, only the probe does,
// as it asks every master, where one call may have touched only the shards
// that answer.
func (l *Limiter) reached(answered bool) {
	if !answered {
		if !l.down.Swap(true) {
			l.downs.Add(1)
		}
		return
	}
	if !l.probing() {
		l.down.Store(false)
	}
}

// probing reports whether watchRedis runs (Run runs).
func (l *Limiter) probing() bool { return l.running.Load() && !l.leaseOff.Load() }

// heardFrom records what a call made within parent, sent at began, learned
// of Redis from its error: nothing when parent ended first (the request went
// away). A reply later than the slow wait is no answer (go-redis bounds a
// sent call by its read timeout, not by the context).
func (l *Limiter) heardFrom(parent context.Context, began time.Time, err error) {
	if parent.Err() == nil {
		l.reached(!unreached(err) && l.inTime(began))
	}
}

// inTime reports whether a call sent at began was answered within the
// slow wait.
func (l *Limiter) inTime(began time.Time) bool {
	return time.Since(began) <= max(l.cfg.SlowWait, l.cfg.Timeout)
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
		if unreached(err) || time.Since(began) > wait {
			continue // still down
		}
		l.down.Store(false)
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

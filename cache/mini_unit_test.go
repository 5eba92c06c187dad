package cache_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
)

// Unit tests of the cache's Lua scripts and key layout on miniredis: an
// in-process Redis of the test's own, so they need no service and run under
// `go test -short` (files *_unit_test.go). miniredis implements every command
// the scripts use (HGET, HSET, HDEL, HMGET, DEL, EXISTS, GET, SET PX, ZADD,
// ZREM, ZRANGE BYLEX LIMIT), but runs them on gopher-lua rather than Redis's
// Lua, so the integration tests (cache_test.go, rebuild*_test.go,
// cluster_test.go) keep running the same scripts on the real Redis. What only
// they cover: a rebuild that runs to the end (its source is a Postgres
// snapshot), and Redis Cluster (CROSSSLOT refusals, which the unit tests
// check by computing slots instead; scans over every master; failovers).

// miniCache is a cache with the default prefix on a miniredis of the test's
// own, and a client of it. The client does not retry: a test that closes
// the miniredis checks the answer, not go-redis' retries of a closed port.
func miniCache(t *testing.T) (*cache.Cache, *redis.Client, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return cache.New(rdb, cache.DefaultPrefix, testRules()), rdb, mr
}

// scriptCall is one EVAL or EVALSHA a client sent: the script's SHA-1
// digest (computed from the source for EVAL), its keys and its arguments.
type scriptCall struct {
	script string
	keys   []string
	args   []string
}

// scriptLog records every script a client runs, directly or in a pipeline.
type scriptLog struct {
	mu    sync.Mutex
	calls []scriptCall
}

// recordScripts installs a scriptLog on rdb.
func recordScripts(rdb *redis.Client) *scriptLog {
	l := &scriptLog{}
	rdb.AddHook(l)
	return l
}

func (l *scriptLog) record(cmds ...redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, cmd := range cmds {
		args := cmd.Args()
		name := strings.ToLower(fmt.Sprint(args[0]))
		if name != "eval" && name != "evalsha" || len(args) < 3 {
			continue
		}
		var n int
		fmt.Sscan(fmt.Sprint(args[2]), &n) //nolint:errcheck // go-redis wrote the count
		c := scriptCall{script: fmt.Sprint(args[1])}
		if name == "eval" {
			c.script = fmt.Sprintf("%x", sha1.Sum([]byte(c.script)))
		}
		for i, a := range args[3:] {
			if i < n {
				c.keys = append(c.keys, fmt.Sprint(a))
			} else {
				c.args = append(c.args, fmt.Sprint(a))
			}
		}
		l.calls = append(l.calls, c)
	}
}

// snapshot returns the calls recorded so far.
func (l *scriptLog) snapshot() []scriptCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]scriptCall(nil), l.calls...)
}

// DialHook passes dials through.
func (l *scriptLog) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook records a script run on its own.
func (l *scriptLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.record(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook records the scripts of a pipeline.
func (l *scriptLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.record(cmds...)
		return next(ctx, cmds)
	}
}

// Package ratelimit holds the limits every API node shares through Redis: the
// per-account request window and the per-address failed-authentication limit.
// Each decision is one Lua script on one key, hash-tagged by account or
// address so it runs on Redis Cluster; the clock is Redis TIME, never the
// node's. When Redis does not answer, a per-node fallback decides, its limit
// divided by the number of live API nodes so that N nodes cannot multiply an
// account's limit.
package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Result is one decision, with what the response headers need.
type Result struct {
	Allowed bool
	// Limit is the window's limit (RateLimit-Limit).
	Limit int
	// Remaining is what the window still accepts (RateLimit-Remaining).
	Remaining int
	// ResetAfter is the time until the window frees capacity (RateLimit-Reset).
	ResetAfter time.Duration
	// RetryAfter is ResetAfter when the request was refused (Retry-After).
	RetryAfter time.Duration
	// Degraded is true when Redis did not answer and the node decided alone.
	Degraded bool
}

// windowScript counts one request in the account's fixed window. Windows are
// aligned to multiples of the window length on the Redis clock, so every node
// agrees on when a window starts.
// KEYS[1] the account's key; ARGV[1] limit; ARGV[2] window in ms.
// Returns {allowed (0|1), remaining, ms until the window ends}.
var windowScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local start = now - (now % w)
local cur = redis.call('HMGET', KEYS[1], 's', 'n')
local n = 0
if tonumber(cur[1]) == start then n = tonumber(cur[2]) end
local allowed = 0
if n < limit then
  n = n + 1
  allowed = 1
  redis.call('HSET', KEYS[1], 's', start, 'n', n)
  redis.call('PEXPIREAT', KEYS[1], start + w)
end
return {allowed, limit - n, start + w - now}
`)

// failScript counts one failed authentication of an address. The window
// starts at the address's first failure.
// KEYS[1] the address's key; ARGV[1] window in ms. Returns {count, ms left}.
var failScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
`)

// blockedScript reads an address's failures. KEYS[1] the address's key.
// Returns {count, ms left}.
var blockedScript = redis.NewScript(`
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local ttl = redis.call('PTTL', KEYS[1])
return {n, ttl}
`)

// Config sizes the limits.
type Config struct {
	// Limit and Window: requests per window per account (MD_RATE_LIMIT, MD_RATE_WINDOW).
	Limit  int
	Window time.Duration
	// AuthFailLimit and AuthFailWindow: failed authentications per address
	// (MD_AUTHFAIL_LIMIT, MD_AUTHFAIL_WINDOW).
	AuthFailLimit  int
	AuthFailWindow time.Duration
	// Prefix of the Redis keys.
	Prefix string
	// Timeout bounds each Redis call before the fallback decides (50ms).
	Timeout time.Duration
}

// Limiter makes the decisions.
type Limiter struct {
	rdb      redis.UniversalClient
	cfg      Config
	fallback *local
}

// New returns a limiter. peers reports how many API nodes are alive (this
// one included); the fallback divides the limits by it.
func New(rdb redis.UniversalClient, cfg Config, peers func() int, now func() time.Time) *Limiter {
	if cfg.Timeout == 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	return &Limiter{rdb: rdb, cfg: cfg, fallback: newLocal(peers, now)}
}

// Config returns the limits.
func (l *Limiter) Config() Config { return l.cfg }

func (l *Limiter) accountKey(account string) string { return l.cfg.Prefix + "{rl:" + account + "}" }
func (l *Limiter) addressKey(addr string) string    { return l.cfg.Prefix + "{af:" + addr + "}" }

// Allow counts one request of an account in its window.
func (l *Limiter) Allow(ctx context.Context, account string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	vals, err := windowScript.Run(ctx, l.rdb, []string{l.accountKey(account)},
		l.cfg.Limit, l.cfg.Window.Milliseconds()).Int64Slice()
	if err != nil {
		r := l.fallback.allow("rl:"+account, l.cfg.Limit, l.cfg.Window)
		return r, fmt.Errorf("ratelimit: window of %s: %w", account, err)
	}
	r := Result{
		Allowed: vals[0] == 1, Limit: l.cfg.Limit, Remaining: int(max(vals[1], 0)),
		ResetAfter: time.Duration(vals[2]) * time.Millisecond,
	}
	if !r.Allowed {
		r.RetryAfter = r.ResetAfter
	}
	return r, nil
}

// Blocked reports whether an address has reached the failed-authentication
// limit; RetryAfter says for how long it stays blocked.
func (l *Limiter) Blocked(ctx context.Context, addr string) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	vals, err := blockedScript.Run(ctx, l.rdb, []string{l.addressKey(addr)}).Int64Slice()
	if err != nil {
		blocked, retry := l.fallback.blocked("af:"+addr, l.cfg.AuthFailLimit)
		return blocked, retry, fmt.Errorf("ratelimit: failures of %s: %w", addr, err)
	}
	if vals[0] >= int64(l.cfg.AuthFailLimit) && vals[1] > 0 {
		return true, time.Duration(vals[1]) * time.Millisecond, nil
	}
	return false, 0, nil
}

// Failed counts one failed authentication of an address, across all nodes.
func (l *Limiter) Failed(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	err := failScript.Run(ctx, l.rdb, []string{l.addressKey(addr)}, l.cfg.AuthFailWindow.Milliseconds()).Err()
	if err != nil {
		l.fallback.fail("af:"+addr, l.cfg.AuthFailLimit, l.cfg.AuthFailWindow)
		return fmt.Errorf("ratelimit: count failure of %s: %w", addr, err)
	}
	return nil
}

// Seconds rounds a duration up to whole seconds, at least 1, for headers.
func Seconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

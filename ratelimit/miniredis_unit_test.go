package ratelimit

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// The *_unit_test.go files run the limiter's scripts and logic on miniredis:
// no service at all, and a Redis clock the test sets. miniredis implements
// everything the scripts call (TIME, HMGET, HSET, HGET, HINCRBY, INCR,
// PEXPIRE, PEXPIREAT, PTTL, SET PX, EVALSHA, SCRIPT FLUSH); with ClockTTL,
// keys expire as SetTime moves its clock, coherent with TIME and PEXPIREAT.

// fakeRedis is a miniredis server and a client of it, on a clock the test
// moves.
type fakeRedis struct {
	*miniredis.Miniredis
	rdb *redis.Client
	now time.Time
}

// newFakeRedis starts a miniredis whose clock reads at and only moves when
// the test advances it; key TTLs run down with that clock.
func newFakeRedis(t *testing.T, at time.Time) *fakeRedis {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(at)
	m.ClockTTL(true)
	// No retries: once the test closes the server, each call fails at once.
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return &fakeRedis{Miniredis: m, rdb: rdb, now: at}
}

// advance moves the Redis clock (TIME, key expiry) forward by d.
func (f *fakeRedis) advance(d time.Duration) {
	f.now = f.now.Add(d)
	f.SetTime(f.now)
}

// unitConfig is a complete config on prefix "u:"; tests change what they judge.
func unitConfig() Config {
	return Config{Limit: 10, Window: time.Minute, AuthFailLimit: 3, AuthFailWindow: 5 * time.Minute,
		Prefix: "u:", Timeout: 2 * time.Second}
}

// newUnitLimiter is a limiter on f with cfg.
func newUnitLimiter(t *testing.T, f *fakeRedis, cfg Config) *Limiter {
	t.Helper()
	l, err := New(f.rdb, cfg, nil, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// windowStart is a time 10.25 s into a 1-minute window (aligned on the Unix
// epoch), so a test knows ResetAfter exactly.
var windowStart = time.Unix(1_700_000_040, 0).UTC() // a multiple of 60 s

// at10s is 10.25 s into the window that starts at windowStart.
var at10s = windowStart.Add(10*time.Second + 250*time.Millisecond)

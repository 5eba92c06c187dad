// Package ratelimit holds the limits every API node shares through Redis: the
// per-account request window and the per-address failed-authentication limit.
// Each decision is one Lua script on one key (scripts.go), hash-tagged by
// account or address so it runs on Redis Cluster; the clock is Redis TIME,
// never the node's. Admissions of concurrent requests share round trips
// (admit.go, batcher.go). When Redis does not answer, a per-node fallback
// decides (local.go), its limit divided by the number of live API nodes so
// that N nodes cannot multiply an account's limit. The package only limits:
// it sends no one else's commands.
package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/batch"
)

// Result is one window decision, with what the response headers need.
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

// DefaultTimeout is the limiter's Redis budget per round trip while Redis
// counts as down and Run does not run (50ms); with Run, a node decides alone
// at once while Redis counts as down. While Redis answers, a call waits up to
// SlowWait (health.go).
const DefaultTimeout = 50 * time.Millisecond

// Config sizes the limits. Every field but Prefix must be set: New does not
// fill in defaults (cmd/marketdata owns them) and refuses what it cannot use.
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
	// Timeout bounds each Redis round trip while Redis counts as down,
	// before the fallback decides (DefaultTimeout).
	Timeout time.Duration
	// SlowWait is how long a call waits for Redis while Redis counts as up
	// (DefaultSlowWait; zero: Timeout, Redis slow or down alike). A round
	// trip with no reply within it counts Redis down (health.go); a sent
	// call may still wait up to the client's read timeout for its reply.
	SlowWait time.Duration
}

// validate refuses a config the scripts cannot run with, naming the field.
// Windows are counted in whole milliseconds on the Redis clock, so a window
// under 1ms would be a modulo by zero in the window script.
func (c Config) validate() error {
	switch {
	case c.Limit < 1:
		return fmt.Errorf("ratelimit: Config.Limit must be at least 1, got %d", c.Limit)
	case c.Window < time.Millisecond:
		return fmt.Errorf("ratelimit: Config.Window must be at least 1ms, got %v", c.Window)
	case c.AuthFailLimit < 1:
		return fmt.Errorf("ratelimit: Config.AuthFailLimit must be at least 1, got %d", c.AuthFailLimit)
	case c.AuthFailWindow < time.Millisecond:
		return fmt.Errorf("ratelimit: Config.AuthFailWindow must be at least 1ms, got %v", c.AuthFailWindow)
	case c.Timeout <= 0:
		return fmt.Errorf("ratelimit: Config.Timeout must be positive, got %v", c.Timeout)
	case c.SlowWait < 0:
		return fmt.Errorf("ratelimit: Config.SlowWait must not be negative, got %v", c.SlowWait)
	}
	return nil
}

// Limiter makes the decisions.
type Limiter struct {
	rdb      redis.UniversalClient
	cfg      Config
	fallback *local
	admits   *batch.Queue[*admitReq]
	// refunding bounds the refunds running off the senders.
	refunding chan struct{}
	// Counts of the admission round trips, for Register.
	trips, admitted, windowCalls, refundFailures atomic.Uint64
	// suspectsHeard counts the first failures this node heard published;
	// unconfirmed the blocks answered before every node confirmed hearing
	// of the address (awaitHeard).
	suspectsHeard, unconfirmed atomic.Uint64
	// id names this node in the addresses' heard sets (heardKey).
	id string
	// heard takes the addresses this node heard, for confirmHeard.
	heard chan heardAck
	// hearDelay delays the subscriber's reading of each publication (tests:
	// a node slow to hear).
	hearDelay time.Duration
	// leased counts the requests admitted from a lease, with no round trip.
	leased atomic.Uint64
	// down: Redis counts as down (health.go); downs counts the times it
	// became so, alone the decisions the fallback made.
	down         atomic.Bool
	downs, alone atomic.Uint64

	// leases and suspects work while Run runs; without it every request
	// goes to Redis.
	leases   *leases
	suspects *suspects
	running  atomic.Bool
	// leaseOff: Run ended; no lease is asked for or handed out.
	leaseOff atomic.Bool
}

// New returns a limiter on rdb, or an error naming the field of cfg it
// cannot use. peers reports how many API nodes are alive (this one
// included); the fallback divides the limits by it (nil: this node alone).
// now is the node's clock, which only the fallback reads (nil: time.Now).
func New(rdb redis.UniversalClient, cfg Config, peers func() int, now func() time.Time) (*Limiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	id := make([]byte, 8)
	rand.Read(id) // crypto/rand.Read never fails
	l := &Limiter{
		rdb: rdb, cfg: cfg, fallback: newLocal(peers, now), refunding: make(chan struct{}, 8),
		leases: newLeases(cfg.Limit, cfg.Window), suspects: newSuspects(),
		id: hex.EncodeToString(id), heard: make(chan heardAck, heardQueue),
	}
	l.admits = newAdmitQueue(l)
	return l, nil
}

// Run lets the node admit without a round trip per request until ctx ends:
// accounts that send it many requests get leases of their windows
// (lease.go), and addresses that never failed authentication skip the
// block check (suspects.go). When ctx ends, leases are given back. Without
// Run, every admission is decided in Redis.
func (l *Limiter) Run(ctx context.Context) {
	if !l.running.CompareAndSwap(false, true) {
		return
	}
	go l.watchSuspects(ctx)
	go l.confirmHeard(ctx)
	go l.watchRedis(ctx)
	l.runLeases(ctx)
}

// leasing reports whether leases may be asked for and handed out.
func (l *Limiter) leasing() bool { return l.running.Load() && !l.leaseOff.Load() }

// Register adds the limiter's counters to reg: how many admissions went to
// Redis, in how many round trips and window script calls. Admissions per
// round trip is how much the batching saves.
func (l *Limiter) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_round_trips_total", Help: "Admission pipelines sent to Redis (re-runs after a lost script and refunds not counted).",
		}, func() float64 { return float64(l.trips.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_admissions_total", Help: "Requests decided by Redis: admitted, refused or blocked, in a round trip or from a lease Redis granted (decisions of the fallback not counted).",
		}, func() float64 { return float64(l.admitted.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "marketdata_ratelimit_suspects_complete", Help: "1 while the node knows every address with failed authentications (subscribed to their first failures and read the counters since) and checks only those for a block; 0 while it checks every address.",
		}, func() float64 {
			if l.suspects.sure.Load() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_suspects_heard_total", Help: "First failed authentications of an address (published by the node that counted them) this node heard, and checks that address for a block from then on.",
		}, func() float64 { return float64(l.suspectsHeard.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_blocks_unconfirmed_total", Help: "Failed authentications that reached the limit and were answered before every node subscribed to first failures confirmed it had heard of the address (after 1 s): another node may have admitted the address's next request.",
		}, func() float64 { return float64(l.unconfirmed.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_decided_alone_total", Help: "Limit decisions (admissions, failed-authentication counts and block checks) the node made alone, on its share of the limit: Redis gave no answer in time or counts as down, or the admission queue was full or the request ended first (docs/api.md).",
		}, func() float64 { return float64(l.alone.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "marketdata_ratelimit_redis_down", Help: "1 while the limiter counts Redis as down (a call got no reply within 1 s): the node then decides limits alone at once, and probes Redis every 100 ms.",
		}, func() float64 {
			if l.down.Load() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_redis_downs_total", Help: "Times the limiter began counting Redis as down.",
		}, func() float64 { return float64(l.downs.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_leased_admissions_total", Help: "Requests admitted from a lease of their account's window, with no round trip.",
		}, func() float64 { return float64(l.leased.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_window_calls_total", Help: "Window script calls Redis answered: one per account per round trip, and a second after Redis lost the script.",
		}, func() float64 { return float64(l.windowCalls.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_refund_failures_total", Help: "Refunds that failed (of requests from blocked addresses, or whose block check failed): those requests stay counted until their window ends.",
		}, func() float64 { return float64(l.refundFailures.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Config returns the limits.
func (l *Limiter) Config() Config { return l.cfg }

func (l *Limiter) accountKey(account string) string { return l.cfg.Prefix + "{rl:" + account + "}" }
func (l *Limiter) addressKey(addr string) string    { return l.cfg.Prefix + "{af:" + addr + "}" }
func (l *Limiter) blockKey(addr string) string      { return l.cfg.Prefix + "{af:" + addr + "}:b" }
func (l *Limiter) heardKey(addr string) string      { return l.cfg.Prefix + "{af:" + addr + "}:h" }
func (l *Limiter) holesKey(account string) string   { return l.cfg.Prefix + "{rl:" + account + "}:h" }

// blockedFor reads a PTTL of a block marker: blocked while it is positive.
func blockedFor(ms int64) (bool, time.Duration) {
	if ms > 0 {
		return true, time.Duration(ms) * time.Millisecond
	}
	return false, 0
}

// Blocked reports whether an address has reached the failed-authentication
// limit; the duration says for how long it stays blocked. It is for a request
// refused for another reason than its key (403): a block wins over that
// refusal, and nothing is counted.
func (l *Limiter) Blocked(ctx context.Context, addr string) (bool, time.Duration, error) {
	if l.decideAlone() {
		l.alone.Add(1)
		blocked, retry := l.fallback.blocked("af:"+addr, l.cfg.AuthFailLimit)
		return blocked, retry, fmt.Errorf("ratelimit: failures of %s: %w", addr, errRedisDown)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, l.budget())
	defer cancel()
	began := time.Now()
	ttl, err := l.rdb.Do(ctx, "PTTL", l.blockKey(addr)).Int64()
	l.heardFrom(parent, began, err)
	if err != nil {
		l.alone.Add(1)
		blocked, retry := l.fallback.blocked("af:"+addr, l.cfg.AuthFailLimit)
		return blocked, retry, fmt.Errorf("ratelimit: failures of %s: %w", addr, err)
	}
	blocked, retry := blockedFor(ttl)
	return blocked, retry, nil
}

// FailOrBlocked is for a request refused for its key (401): if the address
// is blocked it answers so (429, with how long) without counting; else it
// counts the failure, across all nodes, in the same atomic step
// (failOrBlockedScript). With Redis unreachable the node decides alone and
// says so with an error.
//
// The failure that reaches the limit is answered only once every node
// subscribed to first failures has confirmed it heard of the address, or
// after heardWait (awaitHeard): so the next request, on any node, is
// checked for the block.
func (l *Limiter) FailOrBlocked(ctx context.Context, addr string) (bool, time.Duration, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, l.budget())
	defer cancel()
	// This node checks the address from now on, whatever the publication
	// of its first failure does.
	l.suspects.add(addr, time.Now().Add(l.cfg.AuthFailWindow))
	var vals []int64
	err := errRedisDown
	if !l.decideAlone() {
		began := time.Now()
		vals, err = failOrBlockedScript.Run(ctx, l.rdb, []string{l.addressKey(addr), l.blockKey(addr)},
			l.cfg.AuthFailWindow.Milliseconds(), l.cfg.AuthFailLimit, l.suspectsChannel(), addr).Int64Slice()
		l.heardFrom(parent, began, err)
	}
	if err != nil {
		l.alone.Add(1)
		if blocked, retry := l.fallback.blocked("af:"+addr, l.cfg.AuthFailLimit); blocked {
			return true, retry, fmt.Errorf("ratelimit: failures of %s: %w", addr, err)
		}
		l.fallback.fail("af:"+addr, l.cfg.AuthFailLimit, l.cfg.AuthFailWindow)
		return false, 0, fmt.Errorf("ratelimit: count failure of %s: %w", addr, err)
	}
	if vals[0] == 1 {
		return true, time.Duration(vals[1]) * time.Millisecond, nil
	}
	if len(vals) > 2 && vals[2] == int64(l.cfg.AuthFailLimit) {
		l.awaitHeard(parent, addr)
	}
	return false, 0, nil
}

// Seconds rounds a duration up to whole seconds, at least 1, for headers.
func Seconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

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
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// windowScript counts ARGV[3] requests of one account in its fixed window,
// as that many calls one after the other would: the first ones are accepted
// while the window has room, the rest refused. Windows are aligned to
// multiples of the window length on the Redis clock, so every node agrees on
// when a window starts.
// KEYS[1] the account's key; ARGV[1] limit; ARGV[2] window in ms; ARGV[3]
// requests. Returns {accepted, count before them, ms until the window ends,
// window start}.
var windowScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local k = tonumber(ARGV[3])
local start = now - (now % w)
local cur = redis.call('HMGET', KEYS[1], 's', 'n')
local n = 0
if tonumber(cur[1]) == start then n = tonumber(cur[2]) end
local a = math.max(0, math.min(k, limit - n))
if a > 0 then
  redis.call('HSET', KEYS[1], 's', start, 'n', n + a)
  redis.call('PEXPIREAT', KEYS[1], start + w)
end
return {a, n, start + w - now, start}
`)

// refundScript takes back counted requests when their window is still the
// current one. KEYS[1] the account's key; ARGV[1] the window start; ARGV[2]
// how many.
var refundScript = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 's')) == tonumber(ARGV[1]) then
  redis.call('HINCRBY', KEYS[1], 'n', -tonumber(ARGV[2]))
end
return 0
`)

// countFailure is the Lua both failure scripts share: it counts one failed
// authentication of an address, leaving n (the count) and ttl (ms left in
// the window). The window starts at the address's first failure. Once the
// count reaches the limit, a block marker lives until the window ends, so
// that the check every request makes is one plain PTTL, not a script.
// KEYS[1] the address's counter; KEYS[2] its block marker; ARGV[1] window in
// ms; ARGV[2] the limit.
const countFailure = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
if n >= tonumber(ARGV[2]) then redis.call('SET', KEYS[2], '1', 'PX', ttl) end
`

// failScript counts one failure (countFailure). Returns {count, ms left}.
var failScript = redis.NewScript(countFailure + `return {n, ttl}`)

// failOrBlockedScript is what a refused key does, atomically: when the
// address is already blocked, answer so without counting; else count the
// failure (countFailure). So however many bad requests arrive at once on
// however many nodes, exactly `limit` of them get 401 and the rest 429.
// Returns {blocked (0|1), ms left}.
var failOrBlockedScript = redis.NewScript(`
local b = redis.call('PTTL', KEYS[2])
if b > 0 then return {1, b} end
` + countFailure + `return {0, ttl}`)

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
	batcher  batcher
	// refunding bounds the refunds running off the senders.
	refunding chan struct{}
	// Counts of the admission round trips, for Register.
	trips, admitted, windowCalls, refundFailures atomic.Uint64
}

// Register adds the limiter's counters to reg: how many admissions went to
// Redis, in how many round trips and window script calls. Admissions per
// round trip is how much the batching saves.
func (l *Limiter) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_round_trips_total", Help: "Admission pipelines sent to Redis (re-runs after a lost script and refunds not counted).",
		}, func() float64 { return float64(l.trips.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_ratelimit_admissions_total", Help: "Requests decided by Redis: admitted, refused or blocked (decisions of the fallback not counted).",
		}, func() float64 { return float64(l.admitted.Load()) }),
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

// New returns a limiter. peers reports how many API nodes are alive (this
// one included); the fallback divides the limits by it.
func New(rdb redis.UniversalClient, cfg Config, peers func() int, now func() time.Time) *Limiter {
	if cfg.Timeout == 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	return &Limiter{rdb: rdb, cfg: cfg, fallback: newLocal(peers, now), refunding: make(chan struct{}, 8)}
}

// Config returns the limits.
func (l *Limiter) Config() Config { return l.cfg }

func (l *Limiter) accountKey(account string) string { return l.cfg.Prefix + "{rl:" + account + "}" }
func (l *Limiter) addressKey(addr string) string    { return l.cfg.Prefix + "{af:" + addr + "}" }
func (l *Limiter) blockKey(addr string) string      { return l.cfg.Prefix + "{af:" + addr + "}:b" }

// blockedFor reads a PTTL of a block marker: blocked while it is positive.
func blockedFor(ms int64) (bool, time.Duration) {
	if ms > 0 {
		return true, time.Duration(ms) * time.Millisecond
	}
	return false, 0
}

// Allow counts one request of an account in its window.
func (l *Limiter) Allow(ctx context.Context, account string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	vals, err := windowScript.Run(ctx, l.rdb, []string{l.accountKey(account)},
		l.cfg.Limit, l.cfg.Window.Milliseconds(), 1).Int64Slice()
	if err != nil {
		r := l.fallback.allow("rl:"+account, l.cfg.Limit, l.cfg.Window)
		return r, fmt.Errorf("ratelimit: window of %s: %w", account, err)
	}
	return l.windowResult(vals, 0), nil
}

// windowResult is the decision for the i-th (from 0) of the requests one
// windowScript call counted.
func (l *Limiter) windowResult(vals []int64, i int) Result {
	accepted, before := vals[0], vals[1]
	r := Result{Limit: l.cfg.Limit, ResetAfter: time.Duration(vals[2]) * time.Millisecond}
	if int64(i) < accepted {
		r.Allowed = true
		r.Remaining = int(max(int64(l.cfg.Limit)-before-int64(i)-1, 0))
	} else {
		r.Remaining = int(max(int64(l.cfg.Limit)-before-accepted, 0))
		r.RetryAfter = r.ResetAfter
	}
	return r
}

// Blocked reports whether an address has reached the failed-authentication
// limit; RetryAfter says for how long it stays blocked.
func (l *Limiter) Blocked(ctx context.Context, addr string) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	ttl, err := l.rdb.Do(ctx, "PTTL", l.blockKey(addr)).Int64()
	if err != nil {
		blocked, retry := l.fallback.blocked("af:"+addr, l.cfg.AuthFailLimit)
		return blocked, retry, fmt.Errorf("ratelimit: failures of %s: %w", addr, err)
	}
	blocked, retry := blockedFor(ttl)
	return blocked, retry, nil
}

// FailOrBlocked is for a request refused for its key (401): if the address
// is blocked it answers so (429, with how long) without counting; else it
// counts the failure, across all nodes, in the same atomic step.
func (l *Limiter) FailOrBlocked(ctx context.Context, addr string) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	vals, err := failOrBlockedScript.Run(ctx, l.rdb, []string{l.addressKey(addr), l.blockKey(addr)},
		l.cfg.AuthFailWindow.Milliseconds(), l.cfg.AuthFailLimit).Int64Slice()
	if err != nil {
		if blocked, retry := l.fallback.blocked("af:"+addr, l.cfg.AuthFailLimit); blocked {
			return true, retry, fmt.Errorf("ratelimit: failures of %s: %w", addr, err)
		}
		l.fallback.fail("af:"+addr, l.cfg.AuthFailLimit, l.cfg.AuthFailWindow)
		return false, 0, fmt.Errorf("ratelimit: count failure of %s: %w", addr, err)
	}
	if vals[0] == 1 {
		return true, time.Duration(vals[1]) * time.Millisecond, nil
	}
	return false, 0, nil
}

// Failed counts one failed authentication of an address, across all nodes.
func (l *Limiter) Failed(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	err := failScript.Run(ctx, l.rdb, []string{l.addressKey(addr), l.blockKey(addr)},
		l.cfg.AuthFailWindow.Milliseconds(), l.cfg.AuthFailLimit).Err()
	if err != nil {
		l.fallback.fail("af:"+addr, l.cfg.AuthFailLimit, l.cfg.AuthFailWindow)
		return fmt.Errorf("ratelimit: count failure of %s: %w", addr, err)
	}
	return nil
}

// Admission is the outcome of the two shared checks a request with a valid
// key passes: the failed-auth block of its address, then its account's window.
type Admission struct {
	// Blocked: the address is over the failed-authentication limit for
	// BlockedFor; the window was not charged.
	Blocked    bool
	BlockedFor time.Duration
	// Window is the account's window decision (when not Blocked).
	Window Result
}

// Admit runs both checks in one round trip to Redis. Concurrent calls share
// round trips: they are queued and sent together as one pipeline (the keys
// may live on different cluster nodes; the client splits it). When the
// address turns out to be blocked, the window charge is refunded, so the
// result is as if the checks had run one after the other.
func (l *Limiter) Admit(ctx context.Context, addr, account string) (Admission, error) {
	return l.AdmitWith(ctx, addr, account, nil)
}

// AdmitWith is Admit with the caller's own reads added to the same round
// trip: fetch queues commands on the pipeline, and the caller reads their
// results once AdmitWith returns without error. A failed read fails only
// its own command, never the admission. When AdmitWith falls back (Redis
// unreachable), the fetched commands carry errors.
func (l *Limiter) AdmitWith(ctx context.Context, addr, account string, fetch func(redis.Pipeliner)) (Admission, error) {
	req := &admitReq{addr: addr, account: account, fetch: fetch, done: make(chan struct{})}
	l.batcher.start(l)
	timer := time.NewTimer(l.cfg.Timeout)
	defer timer.Stop()
	select {
	case l.batcher.queue <- req:
	case <-timer.C:
		return l.fallbackAdmit(addr, account, fetch, errors.New("ratelimit: admission queue full"))
	case <-ctx.Done():
		return l.fallbackAdmit(addr, account, fetch, ctx.Err())
	}
	var cause error
	select {
	case <-req.done:
	case <-timer.C:
		cause = errors.New("ratelimit: redis did not answer in time")
	case <-ctx.Done():
		cause = ctx.Err()
	}
	if cause != nil {
		if req.state.CompareAndSwap(reqQueued, reqAbandoned) {
			// Never sent: decide alone; its reads fail below.
			return l.fallbackAdmit(addr, account, fetch, cause)
		}
		// A sender has it: its round trip is bounded by the same timeout
		// (and a refund after it, for a batch with a blocked address, by one
		// more), and the caller's reads must not be touched before it ends.
		<-req.done
	}
	if req.err != nil {
		a, err := l.fallbackAdmit(addr, account, nil, req.err)
		return a, err
	}
	return req.res, nil
}

func (l *Limiter) fallbackAdmit(addr, account string, fetch func(redis.Pipeliner), cause error) (Admission, error) {
	if fetch != nil {
		// The caller's reads were never sent: give each its error.
		p := l.rdb.Pipeline()
		fetch(p)
		done, cancel := context.WithCancel(context.Background())
		cancel()
		p.Exec(done) //nolint:errcheck // every command now carries context.Canceled
	}
	var a Admission
	if a.Blocked, a.BlockedFor = l.fallback.blocked("af:"+addr, l.cfg.AuthFailLimit); !a.Blocked {
		a.Window = l.fallback.allow("rl:"+account, l.cfg.Limit, l.cfg.Window)
	}
	return a, fmt.Errorf("ratelimit: admit %s from %s: %w", account, addr, cause)
}

// admitGroup is the requests of one account in one admission round trip.
type admitGroup struct {
	key string
	// n is how many requests the window call counts.
	n   int
	cmd *redis.Cmd
	// good is how many of them were given a place so far.
	good int
}

// admitBatch decides a batch of admissions in one pipeline: one PTTL per
// address and one window call per account, however many of the batch's
// requests share them. An account's window call counts all k of its
// requests, as k calls in a row would; its places are handed out after the
// round trip, in batch order, to the requests whose address is not blocked,
// and what it counted for the others (blocked, or their PTTL failed) is
// refunded. So a poller's concurrent requests cost Redis one script call per
// round trip, and a blocked address never takes a good request's place.
func (l *Limiter) admitBatch(reqs []*admitReq) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
	defer cancel()
	p := l.rdb.Pipeline()
	blocked := make(map[string]*redis.Cmd, len(reqs)) // PTTL of the block marker by address
	groups := make(map[string]*admitGroup, len(reqs))
	for _, r := range reqs {
		if blocked[r.addr] == nil {
			blocked[r.addr] = p.Do(ctx, "PTTL", l.blockKey(r.addr))
		}
		g := groups[r.account]
		if g == nil {
			g = &admitGroup{key: l.accountKey(r.account)}
			groups[r.account] = g
		}
		g.n++
	}
	for _, g := range groups {
		g.cmd = windowScript.EvalSha(ctx, p, []string{g.key}, l.cfg.Limit, l.cfg.Window.Milliseconds(), g.n)
	}
	for _, r := range reqs {
		if r.fetch != nil {
			r.fetch(p)
		}
	}
	// Each request judges its own commands: a lost script, or on Redis
	// Cluster a shard that did not answer, fails only the requests whose
	// commands it held (they fall back); Redis unreachable fails them all.
	p.Exec(ctx) //nolint:errcheck // every command carries its own error
	l.trips.Add(1)
	for _, g := range groups {
		if answered(g.cmd.Err()) {
			l.windowCalls.Add(1)
		}
	}
	l.rerunLost(ctx, groups)
	for _, r := range reqs {
		if r.res, r.err = l.place(groups[r.account], blocked[r.addr]); r.err == nil {
			l.admitted.Add(1)
		}
	}
	// What a window counted beyond the requests given a place (blocked
	// addresses, failed reads) is taken back before those accounts'
	// requests are answered: a caller's next request never finds its
	// window charged for a blocked one (requests of other round trips in
	// between may). Other accounts' requests are answered at once.
	var refunds []*admitGroup
	for _, g := range groups {
		if w, err := g.cmd.Int64Slice(); err == nil && w[0] > int64(g.good) {
			refunds = append(refunds, g)
		}
	}
	for _, r := range reqs {
		if g := groups[r.account]; !slices.Contains(refunds, g) {
			close(r.done)
		}
	}
	if len(refunds) == 0 {
		return
	}
	var waiting []*admitReq // a copy: the sender reuses reqs for its next batch
	for _, r := range reqs {
		if slices.Contains(refunds, groups[r.account]) {
			waiting = append(waiting, r)
		}
	}
	finish := func() {
		l.refund(refunds)
		for _, r := range waiting {
			close(r.done)
		}
	}
	// Off the sender, so that the next batch does not wait for it; a few at
	// a time (a flood from blocked addresses), else on the sender.
	select {
	case l.refunding <- struct{}{}:
		go func() {
			defer func() { <-l.refunding }()
			finish()
		}()
	default:
		finish()
	}
}

// place decides one request of g, in batch order, given its address's
// block marker.
func (l *Limiter) place(g *admitGroup, blocked *redis.Cmd) (Admission, error) {
	w, err := g.cmd.Int64Slice()
	if err != nil {
		return Admission{}, err
	}
	ttl, err := blocked.Int64()
	if err != nil {
		return Admission{}, err
	}
	if isBlocked, retry := blockedFor(ttl); isBlocked {
		return Admission{Blocked: true, BlockedFor: retry}, nil
	}
	res := l.windowResult(w, g.good)
	g.good++
	return Admission{Window: res}, nil
}

// rerunLost runs again the window calls that Redis refused for a lost
// script (a restart, a failover): only those, which counted nothing, so no
// window is charged twice. They go out in one pipeline as EVAL, which
// loads the script again on whichever node runs them.
func (l *Limiter) rerunLost(ctx context.Context, groups map[string]*admitGroup) {
	var p redis.Pipeliner
	for _, g := range groups {
		if !isNoScript(g.cmd.Err()) {
			continue
		}
		if p == nil {
			p = l.rdb.Pipeline()
		}
		g.cmd = windowScript.Eval(ctx, p, []string{g.key}, l.cfg.Limit, l.cfg.Window.Milliseconds(), g.n)
	}
	if p == nil {
		return
	}
	cmds, _ := p.Exec(ctx)
	for _, c := range cmds {
		if answered(c.Err()) {
			l.windowCalls.Add(1)
		}
	}
}

// refund takes back, in one pipeline with a budget of its own, what each
// group's window call counted beyond the requests given a place. A failed
// refund leaves them counted until the window ends
// (marketdata_ratelimit_refund_failures_total).
func (l *Limiter) refund(groups []*admitGroup) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
	defer cancel()
	p := l.rdb.Pipeline()
	for _, g := range groups {
		w, _ := g.cmd.Int64Slice() // read without error by the caller
		refundScript.Eval(ctx, p, []string{g.key}, w[3], w[0]-int64(g.good))
	}
	cmds, _ := p.Exec(ctx)
	for _, c := range cmds {
		if c.Err() != nil {
			l.refundFailures.Add(1)
		}
	}
}

// answered says whether a command reached Redis: it has a reply, an error
// reply included (not a transport failure).
func answered(err error) bool {
	var re redis.Error
	return err == nil || errors.As(err, &re)
}

func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// Seconds rounds a duration up to whole seconds, at least 1, for headers.
func Seconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

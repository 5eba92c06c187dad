package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// StreamsConfig sizes the open-stream limit. Every field but Prefix must be
// set: NewStreams fills in no defaults (DefaultStreamsConfig has them).
type StreamsConfig struct {
	// Limit is how many streams an account may have open across all nodes.
	Limit int
	// Lease is how long a stream's slot lasts unless its node renews it
	// (Run renews every Lease/3): a killed node's slots free within Lease.
	Lease time.Duration
	// Prefix of the Redis keys (the same as Config.Prefix).
	Prefix string
	// Timeout bounds each Redis round trip before the fallback decides.
	Timeout time.Duration
}

// DefaultStreamsConfig is the one home of the open-stream limit's
// defaults: at most 10 open streams per account across all nodes (contract
// §3); a node that dies stops counting within the 15 s lease, its live
// streams' slots renewed every lease/3. The caller sets Prefix.
func DefaultStreamsConfig() StreamsConfig {
	return StreamsConfig{Limit: 10, Lease: 15 * time.Second, Timeout: DefaultTimeout}
}

func (c StreamsConfig) validate() error {
	switch {
	case c.Limit < 1:
		return fmt.Errorf("ratelimit: StreamsConfig.Limit must be at least 1, got %d", c.Limit)
	case c.Lease < 3*time.Millisecond:
		// Leases are whole ms on the Redis clock, renewed every Lease/3.
		return fmt.Errorf("ratelimit: StreamsConfig.Lease must be at least 3ms, got %v", c.Lease)
	case c.Timeout <= 0:
		return fmt.Errorf("ratelimit: StreamsConfig.Timeout must be positive, got %v", c.Timeout)
	}
	return nil
}

// renewBatch is how many streams one renewal round trip carries.
const renewBatch = 500

// Streams counts the open streams of each account across all API nodes: a
// slot per stream in Redis (openStreamScript), leased so that a node that dies
// stops counting on its own, renewed by the node that holds the stream (Run).
// The node also keeps its own streams in memory: they are what it renews,
// what it adds back after Redis lost them, and what it counts alone while
// Redis does not answer.
type Streams struct {
	rdb      redis.UniversalClient
	cfg      StreamsConfig
	fallback *local

	mu   sync.Mutex
	held map[string]map[string]struct{} // account → ids of its streams open on this node
	open int

	refused, decidedLocally, readded, renewFailures, closeFailures atomic.Uint64

	// health, when set (FollowHealth), is the limiter whose view of Redis
	// the slots' opens share: its slow wait while Redis answers, deciding
	// alone at once while it counts as down.
	health atomic.Pointer[Limiter]
}

// FollowHealth makes the slots' opens share l's view of Redis (health.go):
// an open waits for a Redis that answers as long as l's calls do (its slow
// wait; a sent call, up to the client's read timeout) and tells l whether
// Redis answered; while l counts Redis down (and runs), opens are decided
// alone at once. Renewals and closes still go to Redis: they run off the
// request path, and where Redis answers (a slow Redis, the healthy shards of
// a cluster) they keep the count right; a renewal stops at its first batch
// that got no reply at all.
func (s *Streams) FollowHealth(l *Limiter) { s.health.Store(l) }

// skipRedis reports whether calls to Redis are skipped: it counts as down.
func (s *Streams) skipRedis() bool {
	h := s.health.Load()
	return h != nil && h.decideAlone()
}

// budget is how long a call waits for Redis now.
func (s *Streams) budget() time.Duration {
	if h := s.health.Load(); h != nil {
		return max(h.budget(), s.cfg.Timeout)
	}
	return s.cfg.Timeout
}

// NewStreams returns the stream counter on rdb, or an error naming the field
// of cfg it cannot use. peers reports how many API nodes are alive (this one
// included): while Redis does not answer, this node allows an account its
// share of Limit, Limit/peers rounded up (nil: this node alone).
func NewStreams(rdb redis.UniversalClient, cfg StreamsConfig, peers func() int) (*Streams, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Streams{rdb: rdb, cfg: cfg, fallback: newLocal(peers, nil), held: map[string]map[string]struct{}{}}, nil
}

func (s *Streams) key(account string) string { return s.cfg.Prefix + "{st:" + account + "}" }

// Open takes a slot for stream id of account; ids are unique per stream (the
// caller makes them). ok is false when the account has Limit streams open;
// retryAfter is then when the soonest of its leases ends: the earliest a slot
// can free by itself (a killed node's), though a stream its client closes
// frees one at once and a live node's stream renews its lease. err is not nil
// when Redis did not answer: this node then decided alone, on its own streams
// of the account against its share of Limit, and retryAfter, when refused, is
// Lease (which of its streams closes first no one knows); a slot Redis took
// for an Open that timed out on the way back is renewed by no one and lapses
// within Lease.
func (s *Streams) Open(ctx context.Context, account, id string) (ok bool, retryAfter time.Duration, err error) {
	var vals []int64
	if s.skipRedis() {
		err = errRedisDown
	} else {
		parent := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.budget())
		defer cancel()
		began := time.Now()
		vals, err = openStreamScript.Run(ctx, s.rdb, []string{s.key(account)}, s.cfg.Limit, s.cfg.Lease.Milliseconds(), id).Int64Slice()
		if h := s.health.Load(); h != nil {
			h.heardFrom(parent, began, err)
		}
	}
	if err != nil {
		s.decidedLocally.Add(1)
		if ok = s.hold(account, id, s.fallback.share(s.cfg.Limit)); !ok {
			s.refused.Add(1)
			retryAfter = s.cfg.Lease
		}
		return ok, retryAfter, fmt.Errorf("ratelimit: open stream %s of %s: %w", id, account, err)
	}
	if vals[0] != 1 {
		s.refused.Add(1)
		return false, time.Duration(vals[1]) * time.Millisecond, nil
	}
	s.hold(account, id, math.MaxInt)
	return true, 0, nil
}

// hold keeps a stream among this node's when the node holds fewer than most
// streams of its account (or holds it already).
func (s *Streams) hold(account, id string, most int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.held[account]
	if _, dup := ids[id]; dup {
		return true
	}
	if len(ids) >= most {
		return false
	}
	if ids == nil {
		ids = map[string]struct{}{}
		s.held[account] = ids
	}
	ids[id] = struct{}{}
	s.open++
	return true
}

// release forgets a stream; false when this node did not hold it.
func (s *Streams) release(account, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.held[account]
	if _, ok := ids[id]; !ok {
		return false
	}
	delete(ids, id)
	if len(ids) == 0 {
		delete(s.held, account)
	}
	s.open--
	return true
}

// Close gives the slot of a stream back. It is best effort and bounded by
// Timeout, and runs even when ctx is done (a connection's context usually is
// by then): a slot Redis did not free lapses within Lease, no longer renewed.
func (s *Streams) Close(ctx context.Context, account, id string) {
	if !s.release(account, id) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.budget())
	defer cancel()
	if err := s.rdb.ZRem(ctx, s.key(account), id).Err(); err != nil {
		s.closeFailures.Add(1)
	}
}

// Run renews the leases of this node's open streams every Lease/3 until ctx
// is done, adding back the slots Redis lost (so after a flush or restart an
// account's count is whole again within Lease/3) and those opened while the
// fallback decided (so Redis counts them once it answers again).
func (s *Streams) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.renew(ctx)
		}
	}
}

// stream is one stream this node holds open.
type stream struct{ account, id string }

// renew sends the renewals, renewBatch streams to a pipeline: one round trip
// per batch, one script call per account in it.
func (s *Streams) renew(ctx context.Context) {
	s.mu.Lock()
	all := make([]stream, 0, s.open)
	for account, ids := range s.held {
		for id := range ids {
			all = append(all, stream{account, id})
		}
	}
	s.mu.Unlock()
	for len(all) > 0 && ctx.Err() == nil {
		n := min(len(all), renewBatch)
		if !s.renewOnce(ctx, all[:n]) {
			// No reply at all: the rest would wait as long; next tick.
			s.renewFailures.Add(uint64(len(all) - n))
			return
		}
		all = all[n:]
	}
}

func (s *Streams) renewOnce(ctx context.Context, batch []stream) (answered bool) {
	ctx, cancel := context.WithTimeout(ctx, s.budget())
	defer cancel()
	// Each account's script arguments: the lease, then its stream ids.
	args := map[string][]any{}
	for _, st := range batch {
		if args[st.account] == nil {
			args[st.account] = []any{s.cfg.Lease.Milliseconds()}
		}
		args[st.account] = append(args[st.account], st.id)
	}
	p, cmds := s.rdb.Pipeline(), make(map[string]*redis.Cmd, len(args))
	for account, a := range args {
		cmds[account] = renewStreamsScript.EvalSha(ctx, p, []string{s.key(account)}, a...)
	}
	p.Exec(ctx) //nolint:errcheck // each command carries its own error
	// Where Redis lost the script (a restart, a failover), EVAL loads it
	// again, in one more round trip.
	var again redis.Pipeliner
	for account, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			if again == nil {
				again = s.rdb.Pipeline()
			}
			cmds[account] = renewStreamsScript.Eval(ctx, again, []string{s.key(account)}, args[account]...)
		}
	}
	if again != nil {
		again.Exec(ctx) //nolint:errcheck // as above
	}
	for account, cmd := range cmds {
		if n, err := cmd.Int64(); err != nil {
			s.renewFailures.Add(uint64(len(args[account]) - 1))
			answered = answered || !unreached(err)
		} else {
			answered = true
			s.readded.Add(uint64(n))
		}
	}
	var gone []stream
	s.mu.Lock()
	for _, st := range batch {
		if _, held := s.held[st.account][st.id]; !held {
			gone = append(gone, st)
		}
	}
	s.mu.Unlock()
	// A stream closed while its renewal was in flight may have been added
	// back after Close removed it: remove it again.
	if len(gone) > 0 {
		p := s.rdb.Pipeline()
		for _, st := range gone {
			p.ZRem(ctx, s.key(st.account), st.id)
		}
		p.Exec(ctx) //nolint:errcheck // best effort: an unremoved slot lapses within Lease
	}
	return answered
}

// Register adds the stream counter's metrics to reg.
func (s *Streams) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "marketdata_stream_slots_held", Help: "Stream slots this node holds (renews) for its open streams, one per stream.",
		}, func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(s.open) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_streams_refused_total", Help: "Stream opens refused: the account had its limit of open streams.",
		}, func() float64 { return float64(s.refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_streams_decided_locally_total", Help: "Stream opens this node decided alone (Redis did not answer, or the limiter counts it down), against its share of the limit.",
		}, func() float64 { return float64(s.decidedLocally.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_streams_readded_total", Help: "Stream slots Redis had lost (flush, restart, failover, or opened during an outage) that renewal added back.",
		}, func() float64 { return float64(s.readded.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_streams_renew_failures_total", Help: "Stream leases Redis did not renew: they lapse within the lease unless a later renewal succeeds.",
		}, func() float64 { return float64(s.renewFailures.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "marketdata_streams_close_failures_total", Help: "Stream slots Redis did not free at close: they lapse within the lease.",
		}, func() float64 { return float64(s.closeFailures.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

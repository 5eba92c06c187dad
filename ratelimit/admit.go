package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

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
// result is as if the checks had run one after the other. When Redis does not
// answer within the timeout, the node decides alone (a degraded decision) and
// the error says why.
func (l *Limiter) Admit(ctx context.Context, addr, account string) (Admission, error) {
	req := &admitReq{addr: addr, account: account, done: make(chan struct{})}
	l.batcher.start(l)
	timer := time.NewTimer(l.cfg.Timeout)
	defer timer.Stop()
	select {
	case l.batcher.queue <- req:
	case <-timer.C:
		return l.fallbackAdmit(addr, account, errors.New("ratelimit: admission queue full"))
	case <-ctx.Done():
		return l.fallbackAdmit(addr, account, ctx.Err())
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
			// Never sent: nothing was counted in Redis; decide alone.
			return l.fallbackAdmit(addr, account, cause)
		}
		// A sender has it: Redis may count it already, so its decision is
		// the one to give (deciding alone too would count the request twice).
		// The sender's round trip is bounded by the same timeout, and a
		// refund after it, for a batch with a blocked address, by one more.
		<-req.done
	}
	if req.err != nil {
		return l.fallbackAdmit(addr, account, req.err)
	}
	return req.res, nil
}

// fallbackAdmit is the node's own decision, when Redis did not decide.
func (l *Limiter) fallbackAdmit(addr, account string, cause error) (Admission, error) {
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
	// addresses, failed block checks) is taken back before those accounts'
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

// rerunLost runs again the window calls that Redis refused for a lost
// script (a restart, a failover, SCRIPT FLUSH): only those, which counted
// nothing, so no window is charged twice. They go out in one pipeline as
// EVAL, which loads the script again on whichever node runs them.
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

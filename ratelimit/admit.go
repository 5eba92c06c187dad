package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/batch"
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
//
// While Run runs, a request of an address that is no suspect (suspects.go)
// whose account holds a lease on this node (lease.go) is admitted from the
// lease, with no round trip.
func (l *Limiter) Admit(ctx context.Context, addr, account string) (Admission, error) {
	if l.leasing() {
		now := time.Now()
		if res, ok := l.leases.take(account, l.suspects.clear(addr, now), now); ok {
			l.admitted.Add(1)
			l.leased.Add(1)
			return Admission{Window: res}, nil
		}
	}
	if l.decideAlone() {
		return l.fallbackAdmit(addr, account, errRedisDown)
	}
	a, wait, err := l.admitOnce(ctx, addr, account, false)
	if err != nil || wait <= 0 {
		if err == nil {
			l.admitted.Add(1)
		}
		return a, err
	}
	// Refused while another lease of the window may still be out: its
	// unused places come back when it ends (within a sweep and a round
	// trip after); ask again then, once.
	// (The refund's round trip is allowed Timeout, not a slow Redis's
	// wait: a refused request is not held a second for it. A refund
	// slower than that leaves this one refused: under the limit, never
	// over.)
	t := time.NewTimer(min(wait, LongLeaseLength) + leaseSweep + l.cfg.Timeout)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		l.admitted.Add(1)
		return a, nil
	}
	if l.decideAlone() {
		return l.fallbackAdmit(addr, account, errRedisDown)
	}
	if a, _, err = l.admitOnce(ctx, addr, account, true); err == nil {
		if !a.Blocked && !a.Window.Allowed && l.leasing() {
			// Refused again, while this node may hold a lease granted
			// meanwhile to another round trip of the account (two senders
			// run): its places are this request's before anyone's.
			if res, ok := l.leases.handOut(account, time.Now()); ok {
				a = Admission{Window: res}
				l.leased.Add(1)
			}
		}
		l.admitted.Add(1)
	}
	return a, err
}

// errQueueFull means an admission could not be queued within the timeout:
// the senders are behind.
var errQueueFull = errors.New("ratelimit: admission queue full")

// admitOnce sends one admission; wait > 0 says it was refused while a lease
// of its window may still be out, for up to wait.
func (l *Limiter) admitOnce(ctx context.Context, addr, account string, retry bool) (Admission, time.Duration, error) {
	req := &admitReq{addr: addr, account: account, done: make(chan struct{}), retry: retry}
	timer := time.NewTimer(l.budget())
	defer timer.Stop()
	if err := l.admits.Put(ctx, req, timer.C); err != nil {
		if errors.Is(err, batch.ErrFull) {
			err = errQueueFull
		}
		a, ferr := l.fallbackAdmit(addr, account, err)
		return a, 0, ferr
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
		if req.Abandon() {
			// Never sent: nothing was counted in Redis; decide alone. (A
			// queue behind slow round trips is not a down Redis: those
			// round trips say whether Redis answered in time.)
			a, err := l.fallbackAdmit(addr, account, cause)
			return a, 0, err
		}
		// A sender has it: Redis may count it already, so its decision is
		// the one to give (deciding alone too would count the request twice).
		// The sender's round trip is bounded by the same budget, and a
		// refund after it, for a batch with a blocked address, by one more.
		<-req.done
	}
	if req.err != nil {
		a, err := l.fallbackAdmit(addr, account, req.err)
		return a, 0, err
	}
	return req.res, req.leaseWait, nil
}

// fallbackAdmit is the node's own decision, when Redis did not decide.
func (l *Limiter) fallbackAdmit(addr, account string, cause error) (Admission, error) {
	l.alone.Add(1)
	var a Admission
	if a.Blocked, a.BlockedFor = l.fallback.blocked("af:"+addr, l.cfg.AuthFailLimit); !a.Blocked {
		a.Window = l.fallback.allow("rl:"+account, l.cfg.Limit, l.cfg.Window)
	}
	return a, fmt.Errorf("ratelimit: admit %s from %s: %w", account, addr, cause)
}

// admitGroup is the requests of one account in one admission round trip.
type admitGroup struct {
	account string
	// n is how many requests the window call counts; want the lease it
	// asks for besides, a long one when long.
	n, want int
	long    bool
	noLease bool
	cmd     *redis.Cmd
	// w is the call's answer (windowScript), once read.
	w   []int64
	err error
	// good is how many of the requests were given a place so far.
	good int
}

// answer reads the window call's answer once.
func (g *admitGroup) answer() ([]int64, error) {
	if g.w == nil && g.err == nil {
		g.w, g.err = g.cmd.Int64Slice()
		if g.err == nil && (len(g.w) < 6 || int64(len(g.w)) != 6+g.w[0]+g.w[1]) {
			g.err = fmt.Errorf("ratelimit: window script answered %d values for %d places", len(g.w), g.w[0]+g.w[1])
		}
	}
	return g.w, g.err
}

// windowArgs are the window call's arguments for n requests and a lease of
// want, long when long is set (the script makes it long only while half the
// window stays free).
func (l *Limiter) windowArgs(n, want int, long bool) []any {
	var longMS int64
	if long {
		longMS = l.leases.long.Milliseconds()
	}
	return []any{l.cfg.Limit, l.cfg.Window.Milliseconds(), n, want, leaseReserve(l.cfg.Limit), LeaseLength.Milliseconds(),
		longMS, l.cfg.Limit / 2}
}

// leasePlaces are the lease's positions in a window call's answer w, and
// leaseLength how long the lease lasts.
func leasePlaces(w []int64) []int64 { return w[5+w[0] : 5+w[0]+w[1]] }

func leaseLength(w []int64) time.Duration { return time.Duration(w[len(w)-1]) * time.Millisecond }

// admitBatch decides a batch of admissions in one pipeline: one PTTL per
// address and one window call per account, however many of the batch's
// requests share them. An account's window call counts all k of its
// requests, as k calls in a row would; its places are handed out after the
// round trip, in batch order, to the requests whose address is not blocked,
// and what it counted for the others (blocked, or their PTTL failed) is
// refunded. So a poller's concurrent requests cost Redis one script call per
// round trip, and a blocked address never takes a good request's place. The
// call also asks for a lease for an account that sends this node many
// requests (lease.go).
func (l *Limiter) admitBatch(reqs []*admitReq) {
	ctx, cancel := context.WithTimeout(context.Background(), l.budget())
	defer cancel()
	sent := time.Now()
	p := l.rdb.Pipeline()
	blocked := make(map[string]*redis.Cmd, len(reqs)) // PTTL of the block marker by address
	groups := make(map[string]*admitGroup, len(reqs))
	for _, r := range reqs {
		if blocked[r.addr] == nil {
			blocked[r.addr] = p.Do(ctx, "PTTL", l.blockKey(r.addr))
		}
		g := groups[r.account]
		if g == nil {
			g = &admitGroup{account: r.account}
			groups[r.account] = g
		}
		g.n++
		// A second try asks for no lease: the window was just found full,
		// and a lease taken now would hold places the other second tries
		// (on this node or another) are refused for.
		g.noLease = g.noLease || r.retry
	}
	for _, g := range groups {
		if l.leasing() && !g.noLease {
			g.want, g.long = l.leases.want(g.account, sent)
		}
		g.cmd = windowScript.EvalSha(ctx, p, l.windowKeys(g.account), l.windowArgs(g.n, g.want, g.long)...)
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
	inTime := l.inTime(sent)
	l.rerunLost(groups)
	l.reached(inTime && allAnswered(blocked, groups))
	for _, r := range reqs {
		r.res, r.leaseWait, r.err = l.place(groups[r.account], blocked[r.addr])
	}
	var back []refund
	for _, g := range groups {
		w, err := g.answer()
		if err != nil {
			continue
		}
		if w[1] == 0 {
			continue
		}
		if l.leasing() {
			back = append(back, l.leases.grant(g.account, w[3], l.cfg.Window.Milliseconds(), leasePlaces(w), w[2], sent, time.Now(), leaseLength(w))...)
		} else {
			back = append(back, refund{account: g.account, start: w[3], windowMS: l.cfg.Window.Milliseconds(), pos: leasePlaces(w)})
		}
	}
	// What a window counted beyond the requests given a place (blocked
	// addresses, failed block checks) is taken back before those accounts'
	// requests are answered: a caller's next request never finds its
	// window charged for a blocked one (requests of other round trips in
	// between may). Other accounts' requests are answered at once.
	var refunds []*admitGroup
	for _, g := range groups {
		if w, err := g.answer(); err == nil && w[0] > int64(g.good) {
			refunds = append(refunds, g)
			back = append(back, refund{account: g.account, start: w[3], windowMS: l.cfg.Window.Milliseconds(), pos: w[5+g.good : 5+w[0]]})
		}
	}
	for _, r := range reqs {
		if g := groups[r.account]; !slices.Contains(refunds, g) {
			close(r.done)
		}
	}
	if len(back) == 0 {
		return
	}
	var waiting []*admitReq // a copy: the sender reuses reqs for its next batch
	for _, r := range reqs {
		if slices.Contains(refunds, groups[r.account]) {
			waiting = append(waiting, r)
		}
	}
	finish := func() {
		l.giveBack(back)
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

// windowKeys are an account's window and its holes (one hash tag).
func (l *Limiter) windowKeys(account string) []string {
	return []string{l.accountKey(account), l.holesKey(account)}
}

// place decides one request of g, in batch order, given its address's
// block marker. A refused request learns how long a lease of its window
// may still be out.
func (l *Limiter) place(g *admitGroup, blocked *redis.Cmd) (Admission, time.Duration, error) {
	w, err := g.answer()
	if err != nil {
		return Admission{}, 0, err
	}
	ttl, err := blocked.Int64()
	if err != nil {
		return Admission{}, 0, err
	}
	if isBlocked, retry := blockedFor(ttl); isBlocked {
		return Admission{Blocked: true, BlockedFor: retry}, 0, nil
	}
	res := l.windowResult(w, g.good)
	g.good++
	var wait time.Duration
	if !res.Allowed {
		wait = time.Duration(w[4]) * time.Millisecond
	}
	return Admission{Window: res}, wait, nil
}

// windowResult is the decision for the i-th (from 0) of the requests one
// windowScript call counted.
func (l *Limiter) windowResult(vals []int64, i int) Result {
	accepted := vals[0]
	r := Result{Limit: l.cfg.Limit, ResetAfter: time.Duration(vals[2]) * time.Millisecond}
	if int64(i) < accepted {
		r.Allowed = true
		r.Remaining = int(max(int64(l.cfg.Limit)-1-vals[5+i], 0))
	} else {
		r.RetryAfter = r.ResetAfter
	}
	return r
}

// rerunLost runs again the window calls that Redis refused for a lost
// script (a restart, a failover, SCRIPT FLUSH): only those, which counted
// nothing, so no window is charged twice. They go out in one pipeline as
// EVAL, which loads the script again on whichever node runs them.
func (l *Limiter) rerunLost(groups map[string]*admitGroup) {
	// A budget of its own: the first round trip may have used the batch's.
	ctx, cancel := context.WithTimeout(context.Background(), l.budget())
	defer cancel()
	var p redis.Pipeliner
	for _, g := range groups {
		if !isNoScript(g.cmd.Err()) {
			continue
		}
		if p == nil {
			p = l.rdb.Pipeline()
		}
		g.cmd = windowScript.Eval(ctx, p, l.windowKeys(g.account), l.windowArgs(g.n, g.want, g.long)...)
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

// allAnswered reports whether Redis answered every command of a round trip
// (health.go): its block checks and window calls.
func allAnswered(blocked map[string]*redis.Cmd, groups map[string]*admitGroup) bool {
	for _, c := range blocked {
		if unreached(c.Err()) {
			return false
		}
	}
	for _, g := range groups {
		if unreached(g.cmd.Err()) {
			return false
		}
	}
	return true
}

// answered says whether a command reached Redis: it has a reply, an error
// reply included (not a transport failure).
func answered(err error) bool {
	var re redis.Error
	return err == nil || errors.As(err, &re)
}

func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Leases: an account that sends a node many requests gets places of its
// window in advance, in the admission round trip its requests make anyway
// (windowScript's lease), and the node hands them out itself until they run
// out or the lease ends. Its requests then cost no round trip, while the
// window stays exact across nodes:
//
//   - a place is a position in the window (0 … limit-1), taken in Redis
//     once, so no two requests anywhere get the same one;
//   - what a lease did not hand out goes back (refundScript) as soon as it
//     ends, and is taken again before new positions;
//   - leases are granted only above a reserve, so a window's last places go
//     to requests one by one; and a request refused while a lease may still
//     be out waits for it to end and asks again (Admit).
//
// A lease lasts LeaseLength at most and never past its window. Its size is
// what the account sent this node during the last LeaseLength, when that
// is at least leaseMinRate, up to leaseMax.
//
// An account that sends a node fewer (a poller every half second, say) asks
// for a long lease instead: LongLeaseLength (at most a twentieth of the
// window; none in windows under 2 s), sized to what it sent during the last
// LongLeaseLength when that is at least longLeaseMinRate. The window script
// makes it long only while half the window stays free after the grant (it
// knows how many places are free; a node does not), else it is a short one:
// a long lease holds places longer, and a request refused while one is out
// waits up to its end (Admit), which only an account that uses half its
// window within a LongLeaseLength can meet.
const (
	LeaseLength  = 100 * time.Millisecond
	leaseMinRate = 4
	leaseMax     = 1024
	// leaseSweep is how often ended leases give their places back.
	leaseSweep = LeaseLength / 4

	LongLeaseLength  = 2 * time.Second
	longLeaseMinRate = 3
)

// leaseReserve is how many places of a window are never leased.
func leaseReserve(limit int) int { return max(1, limit/20) }

type leases struct {
	limit int
	// long is a long lease's length (longLease); 0: none.
	long time.Duration
	mu   sync.Mutex
	m    map[string]*lease
}

// lease is one account's lease on this node, and its recent rate.
type lease struct {
	// start names the window of pos (Redis clock, ms); windowMS its length.
	start, windowMS int64
	// pos are the places not handed out yet, in order.
	pos []int64
	// ends is when the lease ends, windowEnd when its window does (node
	// clock, both reckoned from before the round trip: early, never late).
	ends, windowEnd time.Time
	// seen counts the account's requests since since; rate is the count of
	// the previous LeaseLength. seenLong and rateLong are the same over
	// LongLeaseLength.
	seen, rate         int
	since              time.Time
	seenLong, rateLong int
	sinceLong          time.Time
}

func newLeases(limit int, window time.Duration) *leases {
	return &leases{limit: limit, long: longLease(window), m: map[string]*lease{}}
}

// longLease is the length of a long lease in a window: LongLeaseLength,
// at most a twentieth of the window, and 0 (none) when that is no longer
// than a short lease.
func longLease(window time.Duration) time.Duration {
	if d := min(LongLeaseLength, window/20); d > LeaseLength {
		return d
	}
	return 0
}

// take counts a request of account and, when use is set and the account
// holds a lease with places, hands out the next one.
func (ls *leases) take(account string, use bool, now time.Time) (Result, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e := ls.m[account]
	if e == nil {
		e = &lease{since: now, sinceLong: now}
		ls.m[account] = e
	}
	if d := now.Sub(e.since); d >= LeaseLength {
		e.rate, e.seen, e.since = e.seen, 0, now
		if d >= 2*LeaseLength {
			e.rate = 0 // the last whole stretch had none
		}
	}
	if d := now.Sub(e.sinceLong); d >= LongLeaseLength {
		e.rateLong, e.seenLong, e.sinceLong = e.seenLong, 0, now
		if d >= 2*LongLeaseLength {
			e.rateLong = 0 // the last whole stretch had none
		}
	}
	e.seen++
	e.seenLong++
	if !use {
		return Result{}, false
	}
	return ls.next(e, now)
}

// handOut hands out the next place of account's lease, if it holds one
// with places, without counting a request (take counted it).
func (ls *leases) handOut(account string, now time.Time) (Result, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if e := ls.m[account]; e != nil {
		return ls.next(e, now)
	}
	return Result{}, false
}

// next takes e's next place while its lease lasts.
func (ls *leases) next(e *lease, now time.Time) (Result, bool) {
	if len(e.pos) == 0 || !now.Before(e.ends) {
		return Result{}, false
	}
	p := e.pos[0]
	e.pos = e.pos[1:]
	return Result{Allowed: true, Limit: ls.limit, Remaining: max(ls.limit-1-int(p), 0), ResetAfter: e.windowEnd.Sub(now)}, true
}

// want is the lease to ask for account, its size and whether long: 0 while
// it holds one with places, or sends this node too little for a lease to
// pay.
func (ls *leases) want(account string, now time.Time) (int, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e := ls.m[account]
	if e == nil || len(e.pos) > 0 && now.Before(e.ends) {
		return 0, false
	}
	if r := max(e.rate, e.seen); r >= leaseMinRate {
		return min(r, leaseMax), false
	}
	if r := max(e.rateLong, e.seenLong); ls.long > 0 && r >= longLeaseMinRate {
		return min(r, leaseMax), true
	}
	return 0, false
}

// grant keeps the places a window call leased to account; sent is when the
// call was sent, now when its answer came, resetMS its answer's time until
// the window ends. Places of an earlier lease not handed out yet, and those
// of this one when it ended before its answer came, are returned for
// refunding.
func (ls *leases) grant(account string, start, windowMS int64, pos []int64, resetMS int64, sent, now time.Time, length time.Duration) (back []refund) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e := ls.m[account]
	if e == nil {
		e = &lease{since: sent, sinceLong: sent}
		ls.m[account] = e
	}
	if len(e.pos) > 0 {
		back = append(back, refund{account: account, start: e.start, windowMS: e.windowMS, pos: e.pos})
	}
	e.start, e.windowMS = start, windowMS
	e.pos = append([]int64(nil), pos...)
	e.windowEnd = sent.Add(time.Duration(resetMS) * time.Millisecond)
	e.ends = sent.Add(length)
	if e.windowEnd.Before(e.ends) {
		e.ends = e.windowEnd
	}
	if !now.Before(e.ends) {
		// The round trip outlasted the lease (a slow Redis): its places go
		// back now, not at the next sweep, so that the requests refused
		// meanwhile find them when they ask again.
		back = append(back, refund{account: account, start: e.start, windowMS: e.windowMS, pos: e.pos})
		e.pos = nil
	}
	return back
}

// refund is places to give back to one window.
type refund struct {
	account         string
	start, windowMS int64
	pos             []int64
}

// sweep takes the places of the leases that ended by now (all of them when
// all is set), and forgets accounts idle for a while.
func (ls *leases) sweep(now time.Time, all bool) []refund {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out []refund
	for a, e := range ls.m {
		if len(e.pos) > 0 && (all || !now.Before(e.ends)) {
			out = append(out, refund{account: a, start: e.start, windowMS: e.windowMS, pos: e.pos})
			e.pos = nil
		}
		if len(e.pos) == 0 && now.Sub(e.since) > 10*LeaseLength && now.Sub(e.sinceLong) > 2*LongLeaseLength {
			delete(ls.m, a)
		}
	}
	return out
}

// runLeases gives back the places of ended leases every leaseSweep, and
// all of them when ctx ends.
func (l *Limiter) runLeases(ctx context.Context) {
	t := time.NewTicker(leaseSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.leaseOff.Store(true)
			l.giveBack(l.leases.sweep(time.Now(), true))
			return
		case now := <-t.C:
			l.giveBack(l.leases.sweep(now, false))
		}
	}
}

// giveBack refunds places in one pipeline with a budget of its own. A
// failed refund leaves them taken until their window ends
// (marketdata_ratelimit_refund_failures_total).
func (l *Limiter) giveBack(rs []refund) {
	if len(rs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.budget())
	defer cancel()
	p := l.rdb.Pipeline()
	for _, r := range rs {
		args := make([]any, 0, 2+len(r.pos))
		args = append(args, r.start, r.windowMS)
		for _, x := range r.pos {
			args = append(args, x)
		}
		refundScript.Eval(ctx, p, []string{l.accountKey(r.account), l.holesKey(r.account)}, args...)
	}
	cmds, _ := p.Exec(ctx)
	for _, c := range cmds {
		if c.Err() != nil {
			l.refundFailures.Add(1)
		}
	}
}

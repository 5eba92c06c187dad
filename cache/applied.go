package cache

import (
	"context"
	"sync"
	"time"
)

// restartJump is a jump of the change number no run of writers makes: a
// number this far above the ones applied means Redis lost its counter
// (seq.go restarts it at its clock), one this far below means someone reset
// it. Writers take some thousands a second; a million is hours of them.
const restartJump = 1 << 20

// maxListedLost bounds the numbers a lost gap lists (onLost): a longer gap
// is handled as lost in full.
const maxListedLost = 4096

// appliedSeqs tracks which change numbers the node has applied the notices
// of (see Reader for why): applied is the highest number such that the
// notice of every number up to it has arrived. Notices arrive out of order
// (several ingest workers, anti-entropy, repairs by other nodes), so the
// numbers above applied that arrived wait in above until the gap below them
// closes.
type appliedSeqs struct {
	// wait is how long a gap may stay open before its notices count as lost.
	wait time.Duration
	now  func() time.Time
	// forget drops everything node memory holds; it runs with mu held, so
	// that no reader trusts the memory between the drop and the jump.
	forget func()
	// onJump reports a jump over a gap: lost notices (lost > 0), or the
	// start or a restart of the counter (lost == 0). It runs with mu held.
	onJump func(lost int64, restarted bool)
	// onLost, when set, gets the numbers a timed-out gap gave up as lost
	// (nil: too many to list), before applied moves over them. It runs
	// with mu held.
	onLost func(missing []int64)

	mu      sync.Mutex
	applied int64
	above   map[int64]struct{}
	// highest is the highest number seen, in a notice or read from Redis.
	highest int64
	// gapSince is when the gap above applied was first seen (zero: none),
	// gapAt the applied it was seen with, gapHigh the highest number seen
	// then: when the gap times out, only numbers up to gapHigh are given up
	// (they were all seen at least wait ago); numbers first seen later are
	// writes still in flight, and get a wait of their own.
	gapSince time.Time
	gapAt    int64
	gapHigh  int64
	// quietUntil: after a restart of the counter, memory does not answer
	// before then (numbers at or below the new applied may be in flight).
	quietUntil time.Time
	// moved is closed (and replaced) whenever applied moves: await's wake-up.
	moved chan struct{}
}

func newAppliedSeqs(wait time.Duration, now func() time.Time, forget func(), onJump func(lost int64, restarted bool)) *appliedSeqs {
	return &appliedSeqs{wait: wait, now: now, forget: forget, onJump: onJump, above: map[int64]struct{}{},
		moved: make(chan struct{})}
}

// await waits, at most d, until the notices of every number up to cur have
// been applied, and reports whether they were. A read that found notices in
// flight waits for them briefly (they follow their writes by about a
// millisecond) rather than reading from Redis everything memory holds.
func (a *appliedSeqs) await(ctx context.Context, cur int64, d time.Duration) bool {
	a.mu.Lock()
	// A gap open longer than d is a notice late or lost: waiting d more
	// will not close it (only its own wait does), so do not make every
	// request pay d meanwhile.
	stuck := !a.gapSince.IsZero() && a.now().Sub(a.gapSince) > d
	a.mu.Unlock()
	if stuck {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		a.mu.Lock()
		ok, moved := cur <= a.applied && !a.quiet(), a.moved
		a.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-moved:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// wake tells await's waiters that applied moved. mu is held.
func (a *appliedSeqs) wake() {
	close(a.moved)
	a.moved = make(chan struct{})
}

// arrived records the notice of seq, once the notice's drops are done: a
// reader that sees seq applied must find its ids gone. 0 is a notice whose
// writer took no number.
func (a *appliedSeqs) arrived(seq int64) {
	if seq <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if seq <= a.applied {
		if a.applied-seq > restartJump {
			// The counter was set back: nothing applied says anything of
			// the new numbers.
			a.restart(seq)
		}
		// Else a notice later than its gap's wait: what it names was
		// dropped all the same.
		return
	}
	a.above[seq] = struct{}{}
	a.highest = max(a.highest, seq)
	a.advance()
}

// mayServe reports whether node memory may answer a request for which Redis
// said cur, the change number read after the request arrived: every notice
// up to cur has been applied. Else writes are in flight whose notices have
// not arrived, and the request must read Redis.
func (a *appliedSeqs) mayServe(cur int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.applied-cur > restartJump {
		a.restart(cur)
		return false
	}
	a.highest = max(a.highest, cur)
	a.advance()
	return cur <= a.applied && !a.quiet()
}

// quiet reports whether a restart's quiet time is running. mu is held.
func (a *appliedSeqs) quiet() bool {
	return !a.quietUntil.IsZero() && a.now().Before(a.quietUntil)
}

// advance moves applied over the numbers that arrived in order, and jumps
// over a gap that stayed open longer than wait: its notices were lost (a
// publisher died between its write and its notice, NATS dropped them), so
// node memory is dropped instead, and the gap closed. mu is held.
func (a *appliedSeqs) advance() {
	from := a.applied
	defer func() {
		if a.applied != from {
			a.wake()
		}
	}()
	a.contiguous()
	now := a.now()
	if a.highest <= a.applied {
		a.gapSince = time.Time{}
		return
	}
	if a.gapSince.IsZero() || a.gapAt != a.applied {
		a.openGap(now)
		return
	}
	if now.Sub(a.gapSince) < a.wait {
		return
	}
	a.forget()
	jump := a.gapHigh - a.applied
	switch {
	case a.applied == 0:
		a.onJump(0, false) // the node's start: it never had notices to lose
	case jump > restartJump:
		a.onJump(0, true)
	default:
		var arrived int64
		for s := range a.above {
			if s <= a.gapHigh {
				arrived++
			}
		}
		a.onJump(jump-arrived, false)
		if a.onLost != nil {
			var missing []int64
			if jump <= maxListedLost {
				for s := a.applied + 1; s <= a.gapHigh; s++ {
					if _, ok := a.above[s]; !ok {
						missing = append(missing, s)
					}
				}
			}
			a.onLost(missing)
		}
	}
	a.applied = a.gapHigh
	for s := range a.above {
		if s <= a.applied {
			delete(a.above, s)
		}
	}
	a.contiguous()
	if a.highest > a.applied {
		a.openGap(now) // numbers first seen after the gap opened: in flight
	} else {
		a.gapSince = time.Time{}
	}
}

// contiguous moves applied over the numbers that arrived in order. mu is held.
func (a *appliedSeqs) contiguous() {
	for {
		if _, ok := a.above[a.applied+1]; !ok {
			return
		}
		delete(a.above, a.applied+1)
		a.applied++
	}
}

// openGap starts the wait of the gap above applied. mu is held.
func (a *appliedSeqs) openGap(now time.Time) {
	a.gapSince, a.gapAt, a.gapHigh = now, a.applied, a.highest
}

// restart forgets node memory and starts over from seq. mu is held.
func (a *appliedSeqs) restart(seq int64) {
	a.forget()
	a.onJump(0, true)
	a.applied, a.highest = seq, seq
	clear(a.above)
	a.gapSince = time.Time{}
	// Numbers up to seq may have been given to writes still in flight:
	// memory answers again only after a notice's wait.
	a.quietUntil = a.now().Add(a.wait)
	a.wake()
}

package cache

import (
	"context"
	"log/slog"

	"github.com/marketdata/marketdata/internal/notice"
)

// How change notices reach node memory, the replica and the Reader's
// subscribers (see Reader for why every drop comes before its number).

// OnChange registers fn to be called with every change notice after node
// memory has applied it (Notice), and with a Flush after Forget: what else
// the node keeps from the cache (the search index, streams) follows the
// same notices. fn runs on the notice's goroutine and must not block.
func (r *Reader) OnChange(fn func(notice.Change)) {
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	r.subs = append(r.subs, fn)
}

// Notice applies one change notice: node memory drops what it names (all
// of it for a flush), the change number is recorded (after the drops: see
// Reader), then OnChange's subscribers are called. It is the one way
// anything leaves node memory before its TTL.
func (r *Reader) Notice(n notice.Change) {
	if n.Flush {
		// A rebuild may have removed documents: the replica loads anew.
		if r.rep != nil {
			r.rep.clear()
		}
		r.forgetAll()
	} else {
		if r.rep != nil {
			if len(n.Markets) > 0 {
				if missing := r.rep.apply(n); len(missing) > 0 {
					r.refreshReplica(missing)
				}
			}
			r.rep.arrivedLate(n.Seq)
		}
		if len(n.Markets) > 0 {
			r.prices.drop(n.Markets...)
		}
		if len(n.Events) > 0 {
			r.events.drop(n.Events...)
			r.pages.dropIf(pagesHolding(n.Events))
		}
		// Trades are not held: a notice's Trades drop nothing here.
	}
	r.seqs.arrived(n.Seq)
	r.tell(n)
}

// Forget drops everything node memory holds and tells the subscribers to
// reload (a Flush): notices may have been missed (NATS reconnected, the
// subscription fell behind, a notice was unreadable).
func (r *Reader) Forget() {
	r.forgetAll()
	r.tell(notice.Change{Flush: true})
}

// forgetAll drops node memory and has the replica loaded again: notices may
// have been missed. It runs under the change numbers' lock (appliedSeqs),
// so it only flags and signals.
func (r *Reader) forgetAll() {
	r.flushMemory()
	if r.rep != nil {
		r.rep.invalidate()
		r.wakeReplica()
	}
}

func (r *Reader) tell(n notice.Change) {
	r.subsMu.RLock()
	defer r.subsMu.RUnlock()
	for _, fn := range r.subs {
		fn(n)
	}
}

// flushMemory drops every resource the node holds.
func (r *Reader) flushMemory() {
	r.prices.flush()
	r.events.flush()
	r.pages.flush()
}

// onJump reports a gap of change numbers closed without its notices.
func (r *Reader) onJump(lost int64, restarted bool) {
	if lost == 0 && r.rep != nil {
		// The node's start, or a counter that restarted: nothing says
		// what the replica missed.
		r.rep.invalidate()
		r.wakeReplica()
	}
	switch {
	case lost > 0:
		r.lost.Add(float64(lost))
		r.lostWarn.Log(context.Background(), r.log, slog.LevelWarn,
			"change notices lost: node memory dropped", "lost", lost)
	case restarted:
		r.log.Info("the cache's change numbers restarted (Redis lost or reset its counter): node memory dropped")
	}
}

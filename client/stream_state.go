package client

import (
	"fmt"
	"maps"
	"time"
)

// The pure parts of a stream: what waits for the consumer (conflated per
// market), the newest version handed out per market, the seq check and
// the backoff.

// streamQueue holds the events waiting for the consumer, in order. A
// market has at most one price waiting: a newer one replaces it where it
// stands (conflation, as the server does for a slow reader), so what the
// queue holds is bounded by the subscriptions, however slow the consumer.
// It never hands out a version of a market older than one it handed out
// before, nor the same price twice (a snapshot after a reconnect repeats
// the prices the consumer has).
type streamQueue struct {
	entries []*streamEntry
	head    int
	// pending is each market's price waiting (its entry in entries).
	pending map[string]*streamEntry
	// given is each market's newest price handed out.
	given map[string]*Price
	// conflated counts prices replaced before they were handed out.
	conflated uint64
}

type streamEntry struct {
	ev StreamEvent
	// gone: taken out (its market was unsubscribed); skipped.
	gone bool
}

func newStreamQueue() *streamQueue {
	return &streamQueue{pending: map[string]*streamEntry{}, given: map[string]*Price{}}
}

// push queues ev. A Disconnected event right after another one still
// waiting replaces it (it carries the count of failures in a row), so a
// long outage the consumer does not watch queues one event, not one per
// attempt.
func (q *streamQueue) push(ev StreamEvent) {
	if ev.Kind == StreamDisconnected && len(q.entries) > q.head {
		if last := q.entries[len(q.entries)-1]; !last.gone && last.ev.Kind == StreamDisconnected {
			last.ev = ev
			return
		}
	}
	q.entries = append(q.entries, &streamEntry{ev: ev})
}

// offer queues p unless the consumer has, or will get, the same or a newer
// version of its market: a lower version is dropped, and so is the same
// version with the same fields (a repeat). The same version with other
// fields (a market's status or event changes without its price version
// moving) is a change and is queued. It reports whether p was queued.
func (q *streamQueue) offer(p *Price) bool {
	e := q.pending[p.MarketID]
	newest := q.given[p.MarketID]
	if e != nil {
		newest = e.ev.Price
	}
	if newest != nil && (p.Version < newest.Version || p.Version == newest.Version && samePrice(p, newest)) {
		return false
	}
	if e != nil {
		e.ev.Price = p
		q.conflated++
		return true
	}
	e = &streamEntry{ev: StreamEvent{Kind: StreamPrice, Price: p}}
	q.entries = append(q.entries, e)
	q.pending[p.MarketID] = e
	return true
}

// forget drops what is known of a market: its price waiting and the
// version handed out (an unsubscribed market that is subscribed again
// gets its current price again).
func (q *streamQueue) forget(id string) {
	if e := q.pending[id]; e != nil {
		e.gone = true
		delete(q.pending, id)
	}
	delete(q.given, id)
}

// pop takes the next event; false when none waits.
func (q *streamQueue) pop() (StreamEvent, bool) {
	for q.head < len(q.entries) {
		e := q.entries[q.head]
		q.entries[q.head] = nil
		q.head++
		if q.head == len(q.entries) {
			q.entries, q.head = q.entries[:0], 0
		} else if q.head > 64 && q.head > len(q.entries)/2 {
			n := copy(q.entries, q.entries[q.head:])
			clear(q.entries[n:])
			q.entries, q.head = q.entries[:n], 0
		}
		if e.gone {
			continue
		}
		if e.ev.Kind == StreamPrice {
			delete(q.pending, e.ev.Price.MarketID)
			q.given[e.ev.Price.MarketID] = e.ev.Price
		}
		return e.ev, true
	}
	return StreamEvent{}, false
}

// len is how many events wait (gone ones included).
func (q *streamQueue) len() int { return len(q.entries) - q.head }

// samePrice says whether a and b carry the same fields.
func samePrice(a, b *Price) bool {
	return a.MarketID == b.MarketID && a.EventID == b.EventID && a.Status == b.Status &&
		a.Version == b.Version && a.UpdatedAt.Equal(b.UpdatedAt) &&
		sameFloat(a.BestBid, b.BestBid) && sameFloat(a.BestAsk, b.BestAsk) &&
		maps.EqualFunc(a.Quotes, b.Quotes, func(x, y Quote) bool {
			return sameFloat(x.Bid, y.Bid) && sameFloat(x.Ask, y.Ask) && sameFloat(x.Last, y.Last) &&
				x.Volume24h == y.Volume24h
		})
}

func sameFloat(a, b *float64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// SeqGapError is a stream connection whose messages skipped or repeated a
// seq number: the server sends 1, 2, 3, … without a gap, so a message was
// lost on the way (or the connection is not the server's). The stream
// drops that connection and opens a new one, whose snapshot on subscribe
// makes the state whole again; a StreamDisconnected event carries it.
type SeqGapError struct {
	Want, Got int64
}

func (e *SeqGapError) Error() string {
	return fmt.Sprintf("marketdata: stream message seq %d, want %d: a message was lost; reconnecting", e.Got, e.Want)
}

// seqCheck checks a connection's seq numbers.
type seqCheck struct{ last int64 }

func (s *seqCheck) check(seq int64) error {
	if seq != s.last+1 {
		return &SeqGapError{Want: s.last + 1, Got: seq}
	}
	s.last = seq
	return nil
}

// streamBackoff is the wait before reconnect attempt n (0: the first after
// a connection was lost): lo doubled n times, at most hi, and jittered by r
// in [0, 1) over its upper half, so that clients a node's shutdown
// disconnected together do not come back together.
func streamBackoff(n int, lo, hi time.Duration, r float64) time.Duration {
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + time.Duration(r*float64(d-d/2))
}

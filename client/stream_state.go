package client

import (
	"errors"
	"fmt"
	"maps"
	"slices"
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
	// news counts the waiting events other than prices; goneN the
	// taken-out entries still in entries; dropped the events push dropped
	// past maxStreamNews.
	news, goneN int
	dropped     uint64
}

type streamEntry struct {
	ev StreamEvent
	// gone: taken out (its market was unsubscribed); skipped.
	gone bool
}

func newStreamQueue() *streamQueue {
	return &streamQueue{pending: map[string]*streamEntry{}, given: map[string]*Price{}}
}

// maxStreamNews bounds the events other than prices waiting for the
// consumer. The folds of push keep the news of any number of reconnects to
// a few events; this cap is for what they cannot fold (acks of commands
// the program sends while it does not read, say): past it the oldest such
// event waiting is dropped, and counted (streamQueue.dropped).
const maxStreamNews = 1024

// push queues ev, an event other than a price. News of the connection
// that waits for a consumer that does not read is folded, so that it
// stays bounded however many times the stream reconnects meanwhile:
//
//   - a Disconnected right after another one still waiting replaces it
//     (it carries the count of failures in a row): a long outage queues
//     one event, not one per attempt;
//   - a Refused "unavailable" right after one of the same command
//     replaces it (the stream subscribes again and again on a node that
//     cannot read prices);
//   - a whole connection cycle (a reconnect's Connected, its resubscribe
//     ack and Refused "unavailable" answers, then a Disconnected) that
//     follows another such cycle still waiting is folded into that one:
//     its Connected stands for both, its ack becomes the latest one (with
//     the markets both listed as missing), and the Disconnected moves to
//     the end.
//
// An event that stands for others counts them in Merged.
func (q *streamQueue) push(ev StreamEvent) {
	switch ev.Kind {
	case StreamDisconnected:
		tail := q.newsTail(16)
		if len(tail) > 0 && tail[0].ev.Kind == StreamDisconnected {
			ev.Merged += tail[0].ev.Merged + 1
			tail[0].ev = ev
			return
		}
		// A folded cycle leaves ev, counting it, to be queued at the end.
		q.foldCycle(tail, &ev)
	case StreamRefused:
		tail := q.newsTail(1)
		if len(tail) > 0 && sameUnavailable(tail[0].ev, ev) {
			ev.Merged += tail[0].ev.Merged + 1
			tail[0].ev = ev
			return
		}
	}
	q.entries = append(q.entries, &streamEntry{ev: ev})
	q.news++
	if q.news > maxStreamNews {
		for i := q.head; i < len(q.entries); i++ {
			if e := q.entries[i]; !e.gone && e.ev.Kind != StreamPrice {
				q.drop(e)
				q.dropped++
				break
			}
		}
	}
}

// newsTail returns up to n of the events other than prices waiting, the
// newest first.
func (q *streamQueue) newsTail(n int) []*streamEntry {
	var tail []*streamEntry
	for i := len(q.entries) - 1; i >= q.head && len(tail) < n; i-- {
		if e := q.entries[i]; !e.gone && e.ev.Kind != StreamPrice {
			tail = append(tail, e)
		}
	}
	return tail
}

// connCycle is the news of one connection after a reconnect, as it waits:
// its Connected, its latest resubscribe ack and "unavailable" refusal, and
// all its entries.
type connCycle struct {
	connected, ack, refused *streamEntry
	entries                 []*streamEntry
}

// readCycle reads a cycle from tail (newest first): zero or more
// resubscribe acks and "unavailable" refusals of a subscribe, then a
// reconnect's Connected. It returns the cycle and what is left of tail.
func readCycle(tail []*streamEntry) (connCycle, []*streamEntry, bool) {
	var c connCycle
	for i, e := range tail {
		switch {
		case e.ev.Kind == StreamConnected && e.ev.Reconnect:
			c.connected = e
			c.entries = append(c.entries, e)
			return c, tail[i+1:], true
		case e.ev.Kind == StreamSubscribed && e.ev.Resubscribe:
			if c.ack == nil {
				c.ack = e
			}
		case e.ev.Kind == StreamRefused && refusedUnavailable(e.ev):
			if c.refused == nil {
				c.refused = e
			}
		default:
			return c, nil, false
		}
		c.entries = append(c.entries, e)
	}
	return c, nil, false
}

// foldCycle folds the cycle that *d, a Disconnected, ends into the cycle
// before it, when that one still waits, ends in a Disconnected and has
// the kinds of events this one has (so that nothing this one says is
// lost). The previous Disconnected is dropped and *d, counting it, is
// queued at the end by the caller; false when there is nothing to fold.
func (q *streamQueue) foldCycle(tail []*streamEntry, d *StreamEvent) bool {
	cur, rest, ok := readCycle(tail)
	if !ok || len(rest) == 0 || rest[0].ev.Kind != StreamDisconnected {
		return false
	}
	prevD := rest[0]
	prev, _, ok := readCycle(rest[1:])
	if !ok || cur.ack != nil && prev.ack == nil || cur.refused != nil && prev.refused == nil {
		return false
	}
	prev.connected.ev.Merged += cur.connected.ev.Merged + 1
	if cur.ack != nil {
		prev.ack.ev = mergeAcks(prev.ack.ev, cur.ack.ev)
	}
	if cur.refused != nil {
		ev := cur.refused.ev
		ev.Merged += prev.refused.ev.Merged + 1
		prev.refused.ev = ev
	}
	for _, e := range cur.entries {
		q.drop(e)
	}
	d.Merged += prevD.ev.Merged + 1
	q.drop(prevD)
	return true
}

// mergeAcks is the resubscribe ack that stands for older and newer: the
// newer's accepted markets; missing, every market either listed as
// missing and newer did not accept.
func mergeAcks(older, newer StreamEvent) StreamEvent {
	missing := slices.Clone(newer.Missing)
	for _, id := range older.Missing {
		if !slices.Contains(missing, id) && !slices.Contains(newer.MarketIDs, id) {
			missing = append(missing, id)
		}
	}
	newer.Missing = missing
	newer.Merged += older.Merged + 1
	return newer
}

func refusedUnavailable(ev StreamEvent) bool {
	var ce *StreamCommandError
	return errors.As(ev.Err, &ce) && ce.Op == "subscribe" && ce.Code == "unavailable"
}

// sameUnavailable says whether a and b are "unavailable" refusals of the
// same markets' subscribe.
func sameUnavailable(a, b StreamEvent) bool {
	if a.Kind != StreamRefused || b.Kind != StreamRefused || !refusedUnavailable(a) || !refusedUnavailable(b) {
		return false
	}
	var ca, cb *StreamCommandError
	errors.As(a.Err, &ca)
	errors.As(b.Err, &cb)
	return slices.Equal(ca.MarketIDs, cb.MarketIDs)
}

// drop takes a waiting entry out (it is skipped when its turn comes), and
// compacts the slice when taken-out entries make up much of it.
func (q *streamQueue) drop(e *streamEntry) {
	if e.gone {
		return
	}
	e.gone = true
	q.goneN++
	if e.ev.Kind != StreamPrice {
		q.news--
	}
	if q.goneN > 64 && q.goneN > (len(q.entries)-q.head)/2 {
		live := q.entries[:0]
		for _, x := range q.entries[q.head:] {
			if !x.gone {
				live = append(live, x)
			}
		}
		clear(q.entries[len(live):])
		q.entries, q.head, q.goneN = live, 0, 0
	}
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
		q.drop(e)
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
			q.goneN--
			continue
		}
		if e.ev.Kind == StreamPrice {
			delete(q.pending, e.ev.Price.MarketID)
			q.given[e.ev.Price.MarketID] = e.ev.Price
		} else {
			q.news--
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

package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// trips sends the Reader's Redis reads. A request queues its commands (or
// none, when node memory holds its answer and it only needs the change
// number) and waits; a sender takes everything queued at that moment, adds
// one read of the change number, and sends it all as one pipeline. So under
// load many requests share a round trip, a lone request goes out at once,
// and every request gets a change number read after it arrived: it was
// queued before the sender took it.
type trips struct {
	c *Cache
	// timeout bounds how long a request waits for its round trip; then it
	// reads the store instead (Redis is slow or gone).
	timeout time.Duration
	queue   chan *trip
	stop    chan struct{}
	start   sync.Once
	stopped sync.Once
}

// trip is one request's part of a round trip.
type trip struct {
	queue func(redis.Pipeliner)
	done  chan struct{}
	state atomic.Int32
	// seq is the change number and seqErr why it is unknown; set before
	// done is closed.
	seq    int64
	seqErr error
	// timer bounds the trip from begin to wait.
	timer *time.Timer
}

const (
	tripQueued int32 = iota
	tripTaken
	tripAbandoned
)

const (
	// maxTripBatch bounds the requests one pipeline carries.
	maxTripBatch = 64
	// tripSenders run at once, so one slow round trip does not hold up all.
	tripSenders = 2
)

// errRedisSlow means the round trip did not answer within the timeout.
var errRedisSlow = errors.New("cache: redis did not answer in time")

func newTrips(c *Cache, timeout time.Duration) *trips {
	return &trips{c: c, timeout: timeout, queue: make(chan *trip, 4096), stop: make(chan struct{})}
}

// do sends queue's commands (nil: none) in the next round trip and returns
// the change number read in it. When it returns an error other than the
// change number's, the commands must not be read: they may not have been
// sent, or may still be being answered.
func (t *trips) do(ctx context.Context, queue func(redis.Pipeliner)) (seq int64, seqErr, err error) {
	tr, err := t.begin(ctx, queue)
	if err != nil {
		return 0, nil, err
	}
	return t.wait(ctx, tr)
}

// begin queues queue's commands for the next round trip and returns at
// once: the caller does other work (its admission) while the trip is sent,
// then waits for it (wait) or drops it (discard). The timeout runs from here.
func (t *trips) begin(ctx context.Context, queue func(redis.Pipeliner)) (*trip, error) {
	t.start.Do(func() {
		for range tripSenders {
			go t.send()
		}
	})
	tr := &trip{queue: queue, done: make(chan struct{}), timer: time.NewTimer(t.timeout)}
	select {
	case t.queue <- tr:
		return tr, nil
	case <-tr.timer.C:
		return nil, errRedisSlow
	case <-ctx.Done():
		tr.timer.Stop()
		return nil, ctx.Err()
	}
}

// wait waits for a trip begin queued; see do.
func (t *trips) wait(ctx context.Context, tr *trip) (seq int64, seqErr, err error) {
	defer tr.timer.Stop()
	select {
	case <-tr.done:
		return tr.seq, tr.seqErr, nil
	case <-tr.timer.C:
		err = errRedisSlow
	case <-ctx.Done():
		err = ctx.Err()
	}
	// A sender that took it writes its commands' answers; they are not read.
	tr.state.CompareAndSwap(tripQueued, tripAbandoned)
	return 0, nil, err
}

// discard gives up a trip begin queued (the request was refused): one not
// yet taken is not sent.
func (t *trips) discard(tr *trip) {
	tr.timer.Stop()
	tr.state.CompareAndSwap(tripQueued, tripAbandoned)
}

func (t *trips) send() {
	batch := make([]*trip, 0, maxTripBatch)
	for {
		var first *trip
		select {
		case first = <-t.queue:
		case <-t.stop:
			return
		}
		batch = batch[:0]
		if first.state.CompareAndSwap(tripQueued, tripTaken) {
			batch = append(batch, first)
		}
	fill:
		for len(batch) < maxTripBatch {
			select {
			case tr := <-t.queue:
				if tr.state.CompareAndSwap(tripQueued, tripTaken) {
					batch = append(batch, tr)
				}
			default:
				break fill
			}
		}
		if len(batch) > 0 {
			t.exec(batch)
		}
	}
}

// exec sends one round trip: the change number first, then each trip's
// commands. A failed command fails only itself; each trip parses its own.
func (t *trips) exec(batch []*trip) {
	p := t.c.rdb.Pipeline()
	seq := t.c.queueSeq(p)
	for _, tr := range batch {
		if tr.queue != nil {
			tr.queue(p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	p.Exec(ctx) //nolint:errcheck // every command carries its own error
	n, err := parseSeq(seq)
	for _, tr := range batch {
		tr.seq, tr.seqErr = n, err
		close(tr.done)
	}
}

// close stops the senders; later requests time out.
func (t *trips) close() { t.stopped.Do(func() { close(t.stop) }) }

package cache

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/batch"
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
	queue   *batch.Queue[*trip]
}

// trip is one request's part of a round trip.
type trip struct {
	batch.Entry
	queue func(redis.Pipeliner)
	done  chan struct{}
	// seq is the change number and seqErr why it is unknown; set before
	// done is closed.
	seq    int64
	seqErr error
	// timer bounds the trip from begin to wait.
	timer *time.Timer
}

const (
	// maxTripBatch bounds the requests one pipeline carries.
	maxTripBatch = 64
	// tripSenders run at once, so one slow round trip does not hold up all.
	tripSenders = 2
	tripDepth   = 4096
)

// errRedisSlow means the round trip did not answer within the timeout.
var errRedisSlow = errors.New("cache: redis did not answer in time")

func newTrips(c *Cache, timeout time.Duration) *trips {
	t := &trips{c: c, timeout: timeout}
	t.queue = batch.New(batch.Config{Max: maxTripBatch, Senders: tripSenders, Depth: tripDepth}, t.exec)
	return t
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
	tr := &trip{queue: queue, done: make(chan struct{}), timer: time.NewTimer(t.timeout)}
	if err := t.queue.Put(ctx, tr, tr.timer.C); err != nil {
		tr.timer.Stop()
		if errors.Is(err, batch.ErrFull) {
			err = errRedisSlow
		}
		return nil, err
	}
	return tr, nil
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
	tr.Abandon()
	return 0, nil, err
}

// discard gives up a trip begin queued (the request was refused): one not
// yet taken is not sent.
func (t *trips) discard(tr *trip) {
	tr.timer.Stop()
	tr.Abandon()
}

// exec sends one round trip: the change number first, then each trip's
// commands. A failed command fails only itself; each trip parses its own.
func (t *trips) exec(taken []*trip) {
	p := t.c.rdb.Pipeline()
	seq := t.c.queueSeq(p)
	for _, tr := range taken {
		if tr.queue != nil {
			tr.queue(p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	p.Exec(ctx) //nolint:errcheck // every command carries its own error
	n, err := parseSeq(seq)
	for _, tr := range taken {
		tr.seq, tr.seqErr = n, err
		close(tr.done)
	}
}

// close stops the senders; later requests time out.
func (t *trips) close() { t.queue.Close() }

package feed

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// maxLoggedFailures caps the failures logged one by one; the rest are counted.
const maxLoggedFailures = 10

// errNoAck stands for an acknowledgement that never came before Run gave up.
var errNoAck = errors.New("no acknowledgement before the drain timeout")

// ackCounter settles publish futures in the background, in publish order,
// counting acknowledgements and failures. JetStream acknowledges in about
// the order messages were sent, so waiting on the oldest future first costs
// nothing, and the queue keeps memory bounded however long Run goes.
type ackCounter struct {
	log       *slog.Logger
	futures   chan jetstream.PubAckFuture
	late      []jetstream.PubAckFuture // tracked after ctx ended; settled at close
	abort     chan struct{}
	done      chan struct{}
	published atomic.Int64
	failed    atomic.Int64
}

func newAckCounter(log *slog.Logger, queue int) *ackCounter {
	a := &ackCounter{
		log:     log,
		futures: make(chan jetstream.PubAckFuture, queue),
		abort:   make(chan struct{}),
		done:    make(chan struct{}),
	}
	go a.reap()
	return a
}

// track hands a future to the reaper. It never blocks past ctx: a future that
// cannot be queued then is settled at close instead.
func (a *ackCounter) track(ctx context.Context, f jetstream.PubAckFuture) {
	select {
	case a.futures <- f:
	case <-ctx.Done():
		a.late = append(a.late, f)
	}
}

// fail counts a message that failed before it got a future.
func (a *ackCounter) fail(subject string, err error) {
	n := a.failed.Add(1)
	if n <= maxLoggedFailures {
		a.log.Warn("feed publish failed", "subject", subject, "error", err.Error())
	}
	if n == maxLoggedFailures {
		a.log.Warn("feed: further publish failures are counted, not logged")
	}
}

func (a *ackCounter) reap() {
	defer close(a.done)
	for f := range a.futures {
		select {
		case <-f.Ok():
			a.published.Add(1)
		case err := <-f.Err():
			a.fail(f.Msg().Subject, err)
		case <-a.abort:
			a.settleNow(f)
		}
	}
}

// settleNow counts a future by its current state; one still pending fails.
func (a *ackCounter) settleNow(f jetstream.PubAckFuture) {
	select {
	case <-f.Ok():
		a.published.Add(1)
	case err := <-f.Err():
		a.fail(f.Msg().Subject, err)
	default:
		a.fail(f.Msg().Subject, errNoAck)
	}
}

// close stops tracking and waits for the reaper. With giveUp, futures still
// pending count as failed instead of being waited for.
func (a *ackCounter) close(giveUp bool) (published, failed int64) {
	if giveUp {
		close(a.abort)
	}
	close(a.futures)
	<-a.done
	for _, f := range a.late {
		a.settleNow(f)
	}
	return a.published.Load(), a.failed.Load()
}

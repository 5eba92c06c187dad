package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/marketdata/marketdata/store"

	"github.com/marketdata/marketdata/bench/world"
)

// streamPublisher publishes the schedule's updates at a steady rate in
// segments: the benchmark stops it to measure memory with no updates and to
// count lost updates, and starts it again where it stopped.
type streamPublisher struct {
	pub    *world.Publisher
	prices []store.Price
	sched  *world.UpdateSchedule
	clock  *noticeClock
	prefix string
	rate   float64

	// next is the first update of the next segment.
	next   int
	cancel context.CancelFunc
	done   chan error
	// sent and seconds add up the segments.
	sent    int64
	seconds float64
	began   time.Time
}

// start publishes from next on at rate until stop.
func (p *streamPublisher) start(ctx context.Context) {
	pctx, cancel := context.WithCancel(ctx)
	p.cancel, p.done, p.began = cancel, make(chan error, 1), time.Now()
	base, before := p.next, p.pub.Sent.Load()
	go func() {
		_, _, err := p.pub.PublishPacedFunc(pctx, len(p.sched.Market)-base, p.rate, func(n int) *world.Outgoing {
			return world.PollPrice(p.prices, p.sched, p.prefix, base+n)
		}, func(n int, at time.Time) { p.sched.Published(base+n, at) })
		// The update stamped last may not have gone out: PublishPacedFunc
		// stamps before it publishes.
		sent := int(p.pub.Sent.Load() - before)
		p.next = base + sent
		if p.next < len(p.sched.Market) {
			p.clock.forget(p.next)
		}
		if err == nil {
			err = fmt.Errorf("publisher: all %d planned updates sent: the plan was too short", len(p.sched.Market))
		} else if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			err = nil
		}
		p.done <- err
	}()
}

// stop ends the segment and waits until JetStream acknowledged everything
// published.
func (p *streamPublisher) stop(ctx context.Context) error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	err := <-p.done
	p.cancel = nil
	p.seconds += time.Since(p.began).Seconds()
	p.sent = int64(p.next)
	if err != nil {
		return err
	}
	return p.pub.Wait(ctx, world.AckTimeout)
}

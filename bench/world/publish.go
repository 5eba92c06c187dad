package world

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publisher publishes to JetStream asynchronously with at most Window
// messages awaiting their acknowledgement, and counts the outcomes in the
// ack and error handlers so the publishing loop never waits on a future.
type Publisher struct {
	js     jetstream.JetStream
	Sent   atomic.Int64
	acked  atomic.Int64
	dups   atomic.Int64 // acknowledged as duplicates: the stream dropped them
	failed atomic.Int64

	mu       sync.Mutex
	firstErr error
}

// NewPublisher opens a JetStream context of its own on nc: the async window
// and handlers belong to the context.
func NewPublisher(nc *nats.Conn, window int) (*Publisher, error) {
	p := &Publisher{}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(window),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, _ *nats.Msg, ack *jetstream.PubAck) {
			p.acked.Add(1)
			if ack.Duplicate {
				p.dups.Add(1)
			}
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			p.fail(fmt.Errorf("publish %s: %w", m.Subject, err))
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	p.js = js
	return p, nil
}

func (p *Publisher) fail(err error) {
	p.failed.Add(1)
	p.mu.Lock()
	if p.firstErr == nil {
		p.firstErr = err
	}
	p.mu.Unlock()
}

// Publish hands one message to JetStream. A full window makes
// PublishMsgAsync stall and then refuse with ErrTooManyStalledMsgs: that is
// back-pressure, so the message is offered again until ctx ends.
func (p *Publisher) Publish(ctx context.Context, o *Outgoing) error {
	for {
		_, err := p.js.PublishMsgAsync(o.Msg())
		switch {
		case err == nil:
			p.Sent.Add(1)
			return nil
		case errors.Is(err, jetstream.ErrTooManyStalledMsgs):
			if ctx.Err() != nil {
				return ctx.Err()
			}
		default:
			return fmt.Errorf("publish %s: %w", o.Subject, err)
		}
	}
}

// Wait waits for every outstanding acknowledgement and fails if any message
// was refused, failed, or dropped by the stream as a duplicate: each of them
// is an update the benchmark would wait for in vain.
func (p *Publisher) Wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.js.PublishAsyncComplete():
	case <-t.C:
		return fmt.Errorf("%d publish acknowledgements still pending after %s", p.js.PublishAsyncPending(), timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	if n := p.failed.Load(); n > 0 {
		p.mu.Lock()
		defer p.mu.Unlock()
		return fmt.Errorf("%d of %d publishes failed, first: %w", n, p.Sent.Load(), p.firstErr)
	}
	if n := p.dups.Load(); n > 0 {
		return fmt.Errorf("%d of %d publishes were dropped by the stream as duplicates", n, p.Sent.Load())
	}
	return nil
}

// PublishAll publishes msgs as fast as the window allows.
func (p *Publisher) PublishAll(ctx context.Context, msgs []Outgoing) error {
	for i := range msgs {
		if err := p.Publish(ctx, &msgs[i]); err != nil {
			return err
		}
	}
	return nil
}

// minSleep is the shortest sleep of the paced loop: messages due within it
// go out together, a few per wake-up at 5,000/s, rather than one timer each.
const minSleep = time.Millisecond

// PublishPaced publishes msgs at rate per second, message n due at
// start + n/rate. It sleeps in batches: on each wake-up it sends every message
// already due, then sleeps until the next one is due (at least minSleep).
// Sent is called just before each message is handed to JetStream, with its
// index and the time. It returns when the first and the last message went out.
func (p *Publisher) PublishPaced(ctx context.Context, msgs []Outgoing, rate float64, sent func(n int, at time.Time)) (first, last time.Time, err error) {
	return p.PublishPacedFunc(ctx, len(msgs), rate, func(n int) *Outgoing { return &msgs[n] }, sent)
}

// PublishPacedFunc is PublishPaced of count messages built by msg as they
// fall due, for runs too long to hold every message at once.
func (p *Publisher) PublishPacedFunc(ctx context.Context, count int, rate float64, msg func(n int) *Outgoing, sent func(n int, at time.Time)) (first, last time.Time, err error) {
	start := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := 0; n < count; {
		due := min(int(time.Since(start).Seconds()*rate)+1, count)
		for ; n < due; n++ {
			m := msg(n)
			at := time.Now()
			if n == 0 {
				first = at
			}
			sent(n, at)
			if err := p.Publish(ctx, m); err != nil {
				return first, last, err
			}
			last = at
		}
		if n == count {
			break
		}
		next := time.Duration(float64(n) / rate * float64(time.Second))
		timer.Reset(max(next-time.Since(start), minSleep))
		select {
		case <-ctx.Done():
			return first, last, ctx.Err()
		case <-timer.C:
		}
	}
	return first, last, nil
}

// PublishWindow is the publishers' bound on unacknowledged messages when
// they publish at a paced rate beside a load.
const PublishWindow = 4096

package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publishing knobs that callers have no reason to turn.
var (
	// progressEvery is how often Run logs its progress.
	progressEvery = time.Minute // the banner of `marketdata dev` stays on screen
	// drainTimeout is how long Run waits for outstanding acknowledgements
	// after it stops publishing.
	drainTimeout = 30 * time.Second
)

// ackQueue is how many futures may wait to be counted. The in-flight bound is
// the caller's jetstream.WithPublishAsyncMaxPending; this only needs to be
// at least that for the publisher never to wait on the counter.
const ackQueue = 4096

// RunOptions says how much Run publishes and how fast.
type RunOptions struct {
	// Rate is the number of messages per second after the initial state;
	// 0 publishes as fast as JetStream acknowledges.
	Rate float64
	// Duration stops the run this long after it started, initial state
	// included; 0 runs until ctx is done.
	Duration time.Duration
	// MaxMessages stops the run after this many messages, initial state
	// included, whether they then succeed or fail; 0 means no limit.
	MaxMessages int
	// SkipInitial starts with the changes, without the initial state.
	SkipInitial bool
	// Logger receives start, progress (every 5 s) and end lines; nil
	// discards them.
	Logger *slog.Logger
}

// Stats is what a run achieved.
type Stats struct {
	// Published counts messages JetStream acknowledged, including those it
	// recognised as duplicates by their Nats-Msg-Id.
	Published int64
	// Failed counts messages that were refused, failed, or not acknowledged
	// within 30 s of the end of the run.
	Failed int64
	// Elapsed is the run's wall time, waiting for acknowledgements included.
	Elapsed time.Duration
}

// asyncPublisher is the part of jetstream.JetStream that Run uses.
type asyncPublisher interface {
	PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	PublishAsyncPending() int
	PublishAsyncComplete() <-chan struct{}
}

var _ asyncPublisher = jetstream.JetStream(nil)

// Run publishes g's initial state (unless opts.SkipInitial), then g's changes
// paced at opts.Rate, until opts.Duration has passed, opts.MaxMessages have
// been sent or ctx is done, and then waits for the outstanding
// acknowledgements. Messages are published asynchronously with their MsgID as
// Nats-Msg-Id; the caller bounds how many are in flight with
// jetstream.WithPublishAsyncMaxPending. Reaching a limit or the end of ctx is
// a normal end (nil error); an error means the run could not go on, such as
// a closed connection, and Stats still counts what was done.
func Run(ctx context.Context, js jetstream.JetStream, g *Generator, opts RunOptions) (Stats, error) {
	return run(ctx, js, g, opts)
}

func run(ctx context.Context, js asyncPublisher, g *Generator, opts RunOptions) (Stats, error) {
	switch {
	case g == nil:
		return Stats{}, errors.New("feed: run: nil generator")
	case opts.Rate < 0 || math.IsNaN(opts.Rate) || math.IsInf(opts.Rate, 0):
		return Stats{}, fmt.Errorf("feed: run: rate %v is not a finite number ≥ 0", opts.Rate)
	case opts.Duration < 0:
		return Stats{}, fmt.Errorf("feed: run: negative duration %v", opts.Duration)
	case opts.MaxMessages < 0:
		return Stats{}, fmt.Errorf("feed: run: negative max messages %d", opts.MaxMessages)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if opts.Duration > 0 {
		runCtx, cancel = context.WithDeadline(ctx, start.Add(opts.Duration))
	}
	defer cancel()

	r := &runner{js: js, acks: newAckCounter(log, ackQueue), limit: int64(opts.MaxMessages)}
	stopProgress := r.logProgress(log, start)
	log.Info("feed started", "rate_per_s", opts.Rate, "duration_s", opts.Duration.Seconds(),
		"max_messages", opts.MaxMessages, "skip_initial", opts.SkipInitial)

	err := r.publishAll(runCtx, g, opts)
	stopProgress()

	giveUp := err != nil
	if !giveUp {
		timer := time.NewTimer(drainTimeout)
		select {
		case <-js.PublishAsyncComplete():
		case <-timer.C:
			giveUp = true
			log.Warn("feed: acknowledgements still pending after the drain timeout",
				"pending", js.PublishAsyncPending(), "timeout_s", drainTimeout.Seconds())
		}
		timer.Stop()
	}
	published, failed := r.acks.close(giveUp)
	st := Stats{Published: published, Failed: failed, Elapsed: time.Since(start)}
	log.Info("feed finished", "sent", r.sent.Load(), "published", st.Published, "failed", st.Failed,
		"elapsed_s", st.Elapsed.Seconds())
	return st, err
}

// runner is the state of one Run.
type runner struct {
	js    asyncPublisher
	acks  *ackCounter
	limit int64        // 0 = none
	sent  atomic.Int64 // messages handed to JetStream, refused ones included
}

func (r *runner) full() bool { return r.limit > 0 && r.sent.Load() >= r.limit }

// publishAll sends the initial state, then paced changes, until a limit or
// the end of ctx. It returns only errors that end the run early.
func (r *runner) publishAll(ctx context.Context, g *Generator, opts RunOptions) error {
	if !opts.SkipInitial {
		for _, m := range g.Initial() {
			if r.full() || ctx.Err() != nil {
				return nil
			}
			if err := r.publish(ctx, m); err != nil {
				return err
			}
		}
	}
	pace := newPacer(opts.Rate, time.Now())
	for !r.full() {
		if pace.wait(ctx) != nil {
			return nil
		}
		if err := r.publish(ctx, g.Next()); err != nil {
			return err
		}
	}
	return nil
}

// publish sends one message. When the caller's in-flight bound is reached,
// PublishMsgAsync stalls and then refuses; that is back-pressure, so the
// message is offered again until ctx ends. Other refusals count as failures,
// except a closed connection, which ends the run.
func (r *runner) publish(ctx context.Context, m Msg) error {
	msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, m.MsgID)
	for {
		f, err := r.js.PublishMsgAsync(msg)
		switch {
		case err == nil:
			r.sent.Add(1)
			r.acks.track(ctx, f)
			return nil
		case errors.Is(err, jetstream.ErrTooManyStalledMsgs):
			if ctx.Err() != nil {
				return nil
			}
		case errors.Is(err, nats.ErrConnectionClosed):
			r.sent.Add(1)
			r.acks.fail(m.Subject, err)
			return fmt.Errorf("feed: publish %s: %w", m.Subject, err)
		default:
			r.sent.Add(1)
			r.acks.fail(m.Subject, err)
			return nil
		}
	}
}

// logProgress logs counts every progressEvery until the returned stop is
// called.
func (r *runner) logProgress(log *slog.Logger, start time.Time) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		lastSent, lastAt := int64(0), start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				sent := r.sent.Load()
				log.Info("feed progress",
					"sent", sent,
					"published", r.acks.published.Load(),
					"failed", r.acks.failed.Load(),
					"in_flight", r.js.PublishAsyncPending(),
					"rate_per_s", math.Round(float64(sent-lastSent)/now.Sub(lastAt).Seconds()),
					"elapsed_s", math.Round(now.Sub(start).Seconds()))
				lastSent, lastAt = sent, now
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

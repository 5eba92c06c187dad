package feed

import (
	"context"
	"time"
)

const (
	// minSleep batches sleeps: a message due less than this far ahead goes out
	// at once, so at 5,000/s about ten messages share one timer instead of
	// each waiting on a timer finer than the scheduler keeps.
	minSleep = 2 * time.Millisecond
	// maxLag bounds catching up: after a stall the schedule slips so that at
	// most this much backlog is sent in a burst.
	maxLag = time.Second
)

// pacer spaces messages at rate per second by giving message n the due time
// start + n/rate, rather than by ticking: the schedule never drifts and a
// late message is followed by a short burst that catches up.
type pacer struct {
	rate  float64
	start time.Time
	n     int64
	timer *time.Timer
}

func newPacer(rate float64, start time.Time) *pacer {
	return &pacer{rate: rate, start: start}
}

// delay schedules the next message and returns how long to wait before
// sending it at now: 0 when it is due, or due within minSleep.
func (p *pacer) delay(now time.Time) time.Duration {
	if p.rate <= 0 {
		return 0
	}
	due := p.start.Add(time.Duration(float64(p.n) / p.rate * float64(time.Second)))
	p.n++
	d := due.Sub(now)
	if d < -maxLag {
		p.start = p.start.Add(-d - maxLag)
	}
	if d < minSleep {
		return 0
	}
	return d
}

// wait blocks until the next message is due or ctx is done.
func (p *pacer) wait(ctx context.Context) error {
	d := p.delay(time.Now())
	if d == 0 {
		return ctx.Err()
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.timer.C:
		return nil
	case <-ctx.Done():
		p.timer.Stop()
		return ctx.Err()
	}
}

// Package ratelog keeps a log line that repeats per request from flooding
// the log while a dependency is down: the first occurrence is written at
// once, then at most one per interval, each with the count of occurrences
// held back since the last line written.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultEvery is the shortest time between two lines of a zero Limiter.
const DefaultEvery = 10 * time.Second

// Limiter decides which occurrences of one log line are written. The zero
// value is ready: at most one line per DefaultEvery on the wall clock. Safe
// for concurrent use.
type Limiter struct {
	// Every is the shortest time between two lines (DefaultEvery when 0).
	Every time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu         sync.Mutex
	last       time.Time
	written    bool
	suppressed int
}

// Allow records one occurrence and reports whether to write it, and if so
// how many occurrences were held back since the last one written.
func (l *Limiter) Allow() (ok bool, suppressed int) {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	every := l.Every
	if every <= 0 {
		every = DefaultEvery
	}
	t := now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.written && t.Sub(l.last) < every {
		l.suppressed++
		return false, 0
	}
	suppressed, l.suppressed = l.suppressed, 0
	l.last, l.written = t, true
	return true, suppressed
}

// Log writes msg at level through log when Allow lets this occurrence
// through, with args and "suppressed": the occurrences held back since the
// previous line.
func (l *Limiter) Log(ctx context.Context, log *slog.Logger, level slog.Level, msg string, args ...any) {
	ok, suppressed := l.Allow()
	if !ok {
		return
	}
	log.Log(ctx, level, msg, append(args, "suppressed", suppressed)...)
}

// Package retry paces the retries of a loop that waits for a dependency to
// answer: a wait that doubles from a first value up to a cap, and starts
// again from the first value after a success.
package retry

import (
	"context"
	"time"
)

// Backoff is a doubling wait between tries: First, then twice the previous
// wait, at most Max. The zero value waits 0 forever: set First and Max. Not
// safe for concurrent use: each loop keeps its own.
type Backoff struct {
	// First is the first wait, and the one after Reset.
	First time.Duration
	// Max caps the wait.
	Max time.Duration

	next time.Duration
}

// Next returns the wait before the next try and doubles the one after it.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.First
	}
	d := min(b.next, b.Max)
	b.next = min(2*b.next, b.Max)
	return d
}

// Reset makes the next wait First again (after a success).
func (b *Backoff) Reset() { b.next = 0 }

// Retrying reports whether a wait was taken since the last Reset: the loop
// has failed at least once.
func (b *Backoff) Retrying() bool { return b.next != 0 }

// Wait waits Next, or until ctx ends: then it returns ctx.Err().
func (b *Backoff) Wait(ctx context.Context) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

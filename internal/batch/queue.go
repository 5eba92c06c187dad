package batch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Entry is an item's place in a Queue: embed it in the item's type. An item
// is queued until a sender takes it or its caller abandons it; exactly one
// of the two wins, so an abandoned item is never sent, and a taken one is
// always handed to the send function.
type Entry struct{ state atomic.Int32 }

const (
	queued int32 = iota
	taken
	abandoned
)

func (e *Entry) entry() *Entry { return e }

// Abandon gives the item up if no sender has taken it yet, and reports
// whether it did. False means a sender has it: it is being sent, or was, and
// the caller must treat it as sent.
func (e *Entry) Abandon() bool { return e.state.CompareAndSwap(queued, abandoned) }

// Item is what a Queue carries: a pointer to a type that embeds Entry.
type Item interface{ entry() *Entry }

// Config sizes a Queue.
type Config struct {
	// Max bounds the items of one batch.
	Max int
	// Senders send batches at once, so that one slow batch does not hold
	// up the rest.
	Senders int
	// Depth is how many items may wait to be taken.
	Depth int
}

// ErrFull means an item could not be queued before its caller's deadline:
// the queue stayed full (the senders are behind).
var ErrFull = errors.New("batch: queue full")

// Queue hands queued items to a send function in batches: each sender takes
// what is queued at that moment, up to Config.Max. The senders start with
// the first Put, so a Queue that is never used costs no goroutine.
type Queue[T Item] struct {
	cfg     Config
	send    func([]T)
	ch      chan T
	stop    chan struct{}
	start   sync.Once
	stopped sync.Once
}

// New returns a queue whose senders call send with each batch. send owns
// the items it is given (finishing them is its job) but not the slice,
// which the sender reuses for its next batch.
func New[T Item](cfg Config, send func([]T)) *Queue[T] {
	cfg.Max, cfg.Senders = max(cfg.Max, 1), max(cfg.Senders, 1)
	return &Queue[T]{cfg: cfg, send: send, ch: make(chan T, max(cfg.Depth, 0)), stop: make(chan struct{})}
}

// Put queues it. While the queue is full it waits, until expire fires
// (ErrFull) or ctx ends (ctx's error); then it is not queued.
func (q *Queue[T]) Put(ctx context.Context, it T, expire <-chan time.Time) error {
	q.start.Do(func() {
		for range q.cfg.Senders {
			go q.run()
		}
	})
	select {
	case q.ch <- it:
		return nil
	case <-expire:
		return ErrFull
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the senders; an item queued after is never sent, and its
// caller gives up at its own deadline. Closing twice is not an error.
func (q *Queue[T]) Close() { q.stopped.Do(func() { close(q.stop) }) }

func (q *Queue[T]) run() {
	batch := make([]T, 0, q.cfg.Max)
	add := func(it T) bool {
		if it.entry().state.CompareAndSwap(queued, taken) {
			batch = append(batch, it)
		}
		return len(batch) < q.cfg.Max
	}
	for Collect(q.stop, q.ch, add) {
		if len(batch) > 0 {
			q.send(batch)
		}
		clear(batch)
		batch = batch[:0]
	}
}

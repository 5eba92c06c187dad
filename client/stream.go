package client

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Stream is a price stream (GET /public/v1/stream, contract §3): one
// WebSocket, subscribed to a set of markets, that the client reconnects
// by itself. Read it with Next or Events from one goroutine; Subscribe,
// Unsubscribe and Close may be called from any.
//
// The client reads the connection continuously, whatever the consumer
// does, so the server never closes it as a slow reader (4008): prices
// wait in the Stream, at most one per market, the newest (an older one
// waiting is replaced where it stands in the order). News of the
// connection folds too: however many times the stream reconnects while the
// consumer does not read, a few events wait (see StreamEvent.Merged), and
// at most 1024 events other than prices ever do (DroppedEvents). A
// consumer never gets an older version of a market after a newer one, nor
// the same price twice, across reconnects too.
type Stream struct {
	c       *Client
	ctx     context.Context
	cancel  context.CancelFunc
	silence time.Duration
	strict  bool

	// writeMu orders the commands on the wire with cmds.
	writeMu sync.Mutex

	mu sync.Mutex
	// markets are the markets the stream subscribes to (on every
	// connection).
	markets map[string]struct{}
	q       *streamQueue
	// conn is the open connection (nil between connections); cmds the
	// commands sent on it that wait for their answer, in order.
	conn *websocket.Conn
	cmds []streamCmd
	// err is why the stream ended (nil while it runs); drain: Next hands
	// out what waits before err.
	err    error
	drain  bool
	closed bool

	notify chan struct{}
	done   chan struct{}
}

// streamCmd is a command sent on a connection.
type streamCmd struct {
	op    string
	ids   []string
	resub bool
}

// streamStrict makes streams decode strictly (tests).
var streamStrict atomic.Bool

// Stream opens a price stream subscribed to ids (0 to MaxStreamMarkets
// market ids; more can be subscribed later; an id that is not a universal
// id is an error wrapping ErrInvalidID). It returns once the first
// connection is open; opening it is retried like a request (WithMaxRetries,
// WithBackoff) after a network error, a 502, 503 or 504, or a 429 whose
// Retry-After is within WithMaxRetryAfter. Any other refusal of the upgrade
// is returned as an *Error: a 401 unauthorized, a 403 (insufficient_scope
// for a key without stream:read), a 429 asking for longer.
//
// ctx is the stream's life: cancelling it closes the connection (1000)
// and ends the stream, as Close does. After the first connection the
// stream reconnects by itself for as long as ctx lasts (see StreamEvent);
// it ends by itself only when the server closes it with CloseKeyRevoked
// or CloseAccessWithdrawn (a *StreamClosedError), or an upgrade is refused
// for good (an *Error).
func (c *Client) Stream(ctx context.Context, ids []string) (*Stream, error) {
	markets := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if err := checkID("Stream", id); err != nil {
			return nil, err
		}
		markets[id] = struct{}{}
	}
	if len(markets) > MaxStreamMarkets {
		return nil, fmt.Errorf("client: Stream: %d markets, at most %d", len(markets), MaxStreamMarkets)
	}
	s := &Stream{c: c, silence: time.Duration(streamSilence.Load()), strict: streamStrict.Load(), markets: markets,
		q: newStreamQueue(), notify: make(chan struct{}, 1), done: make(chan struct{})}
	var conn *websocket.Conn
	var heard *atomic.Int64
	for attempt := 0; ; attempt++ {
		var err error
		heard = new(atomic.Int64)
		conn, err = s.dial(ctx, heard)
		if err == nil {
			break
		}
		wait, retry := s.retryWait(err, attempt)
		if !retry || attempt >= c.maxRetries || ctx.Err() != nil {
			return nil, err
		}
		if !sleepCtx(ctx, wait) {
			return nil, err
		}
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	go s.run(conn, heard)
	return s, nil
}

// Subscribe adds markets to the stream: it sends a subscribe of those not
// subscribed yet on the open connection (or the next one, if none is
// open). Its answer comes as a StreamSubscribed event, then the current
// price of each accepted market. An id that is not a market id, or more
// than MaxStreamMarkets markets in all, is refused here and nothing is
// subscribed (an invalid id's error wraps ErrInvalidID). It returns an
// error once the stream has ended.
func (s *Stream) Subscribe(ids ...string) error {
	if err := checkIDs("Subscribe", ids); err != nil {
		return err
	}
	return s.change("subscribe", func() ([]string, error) {
		var fresh []string
		for _, id := range ids {
			if _, ok := s.markets[id]; !ok && !slices.Contains(fresh, id) {
				fresh = append(fresh, id)
			}
		}
		if n := len(s.markets) + len(fresh); n > MaxStreamMarkets {
			return nil, fmt.Errorf("client: Subscribe: that would make %d markets, at most %d", n, MaxStreamMarkets)
		}
		for _, id := range fresh {
			s.markets[id] = struct{}{}
		}
		return fresh, nil
	})
}

// Unsubscribe drops markets from the stream: nothing more is handed out
// for them from now on (a price of theirs waiting is dropped), and an
// unsubscribe is sent on the open connection; its answer comes as a
// StreamUnsubscribed event. Ids the stream does not have are ignored.
func (s *Stream) Unsubscribe(ids ...string) error {
	return s.change("unsubscribe", func() ([]string, error) {
		var gone []string
		for _, id := range ids {
			if _, ok := s.markets[id]; ok {
				delete(s.markets, id)
				s.q.forget(id)
				gone = append(gone, id)
			}
		}
		return gone, nil
	})
}

// change applies a subscribe or an unsubscribe (op): pick changes the
// stream's markets, under s.mu, and returns the ids the command names
// (none: nothing is sent). The command is sent on the open connection, and
// waits in cmds for its answer; with no connection open, the next one
// subscribes the markets as they are then. A command that cannot be
// written closes the connection: the reconnect subscribes the markets as
// they are, which this change is already part of. It returns the stream's
// end if it has ended, else pick's error.
func (s *Stream) change(op string, pick func() ([]string, error)) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	ids, err := pick()
	conn := s.conn
	send := err == nil && conn != nil && len(ids) > 0
	if send {
		s.cmds = append(s.cmds, streamCmd{op: op, ids: ids})
	}
	s.mu.Unlock()
	if err != nil || !send {
		return err
	}
	if err := writeStreamCommand(s.ctx, conn, op, ids); err != nil {
		conn.CloseNow() //nolint:errcheck // the reconnect subscribes the markets as they are
	}
	return nil
}

// Markets lists the markets the stream subscribes to, sorted.
func (s *Stream) Markets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marketList()
}

func (s *Stream) marketList() []string {
	ids := make([]string, 0, len(s.markets))
	for id := range s.markets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Next returns the next event, waiting for one until ctx ends. Once the
// stream has ended it returns why: after Close, ErrStreamClosed; after
// the stream's context ended, its error; after the server ended it (a
// *StreamClosedError with CloseKeyRevoked or CloseAccessWithdrawn) or
// refused a reconnect for good (an *Error), that error once the events
// that came before it were handed out.
func (s *Stream) Next(ctx context.Context) (StreamEvent, error) {
	for {
		s.mu.Lock()
		if s.err != nil && !s.drain {
			err := s.err
			s.mu.Unlock()
			return StreamEvent{}, err
		}
		if ev, ok := s.q.pop(); ok {
			if s.q.len() > 0 {
				s.signal() // for another goroutine waiting
			}
			s.mu.Unlock()
			return ev, nil
		}
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return StreamEvent{}, err
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return StreamEvent{}, ctx.Err()
		}
	}
}

// Events iterates over the stream's events until it ends (or ctx does):
// the last pair carries the error Next returned.
func (s *Stream) Events(ctx context.Context) iter.Seq2[StreamEvent, error] {
	return func(yield func(StreamEvent, error) bool) {
		for {
			ev, err := s.Next(ctx)
			if err != nil {
				yield(StreamEvent{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Close ends the stream: its connection is closed (1000) and Next returns
// ErrStreamClosed. It waits for the connection's close (a few seconds at
// most) and returns nil.
func (s *Stream) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	<-s.done
	return nil
}

// Done is closed when the stream has ended; Err says why.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Err is why the stream ended, nil while it runs.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// DroppedEvents counts the events other than prices the stream dropped,
// oldest first, because more than 1024 waited for the consumer: news it
// cannot fold (see StreamEvent.Merged), such as the acks of thousands of
// Subscribe calls made while nothing read the stream. 0 for a consumer
// that reads.
func (s *Stream) DroppedEvents() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.dropped
}

// Conflated counts the prices replaced by a newer version of their market
// before the consumer took them.
func (s *Stream) Conflated() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.conflated
}

// finish ends the stream with err (nil: the context ended or Close).
func (s *Stream) finish(err error, drain bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		drain = false
		err = ErrStreamClosed
		if !s.closed {
			err = s.ctx.Err()
			if cause := context.Cause(s.ctx); cause != nil {
				err = cause
			}
		}
	}
	s.err, s.drain = err, drain
	s.conn, s.cmds = nil, nil
	s.signal()
}

// event queues ev for the consumer.
func (s *Stream) event(ev StreamEvent) {
	s.mu.Lock()
	s.push(ev)
	s.mu.Unlock()
}

// push queues ev; s.mu is held.
func (s *Stream) push(ev StreamEvent) {
	s.q.push(ev)
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

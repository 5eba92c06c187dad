package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Close codes a stream's server sends (contract §3).
const (
	// CloseGoingAway: the node shuts down; the stream reconnects.
	CloseGoingAway = 1001
	// CloseSlowReader: the client took nothing for 30 s while messages
	// waited; the stream reconnects.
	CloseSlowReader = 4008
	// CloseKeyRevoked: the key was revoked or expired; the stream ends.
	CloseKeyRevoked = 4401
	// CloseAccessWithdrawn: the account's access was withdrawn; the
	// stream ends.
	CloseAccessWithdrawn = 4403
)

// StreamClosedError is a close of the stream's connection by the server,
// with its close code and reason. The stream ends with it for
// CloseKeyRevoked and CloseAccessWithdrawn; any other code reconnects, and
// a StreamDisconnected event carries it.
type StreamClosedError struct {
	Code   int
	Reason string
}

func (e *StreamClosedError) Error() string {
	s := "marketdata: stream closed by the server with " + strconv.Itoa(e.Code)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// StreamCommandError is the server's "error" answer to a subscribe or an
// unsubscribe the stream sent: Code "invalid_request" (the command was
// refused; nothing changed) or "unavailable" (prices could not be read;
// the stream subscribes those markets again after a backoff).
type StreamCommandError struct {
	// Op is "subscribe" or "unsubscribe"; MarketIDs the command's ids.
	Op        string
	MarketIDs []string
	Code      string
	Message   string
}

func (e *StreamCommandError) Error() string {
	return fmt.Sprintf("marketdata: stream %s of %d markets refused: %s: %s", e.Op, len(e.MarketIDs), e.Code, e.Message)
}

// ErrStreamClosed is how a stream ended by Close ends.
var ErrStreamClosed = errors.New("marketdata: stream closed")

// errStreamSilent: nothing came from the server, not even a ping, for
// longer than the server's ping interval allows.
var errStreamSilent = errors.New("marketdata: stream connection silent (no message nor ping): reconnecting")

// StreamEventKind says what a StreamEvent is.
type StreamEventKind int

// The kinds of StreamEvent.
const (
	// StreamPrice: a market's new price (Price).
	StreamPrice StreamEventKind = iota + 1
	// StreamConnected: a connection is open (Reconnect: not the first).
	StreamConnected
	// StreamSubscribed: the server accepted a subscribe: MarketIDs are
	// subscribed, Missing are not served (they are dropped from the
	// stream's markets). Resubscribe: the subscribe of every market the
	// stream had, sent after a reconnect.
	StreamSubscribed
	// StreamUnsubscribed: the server acknowledged an unsubscribe of
	// MarketIDs.
	StreamUnsubscribed
	// StreamDisconnected: the connection was lost or could not be opened
	// (Err says why: a network error, a *StreamClosedError such as 1001, a
	// *SeqGapError, an *Error such as a 503 at the upgrade); the stream
	// tries again in RetryIn. Attempts counts the failures in a row.
	StreamDisconnected
	// StreamRefused: the server refused a subscribe or unsubscribe (Err
	// is a *StreamCommandError).
	StreamRefused
)

func (k StreamEventKind) String() string {
	switch k {
	case StreamPrice:
		return "price"
	case StreamConnected:
		return "connected"
	case StreamSubscribed:
		return "subscribed"
	case StreamUnsubscribed:
		return "unsubscribed"
	case StreamDisconnected:
		return "disconnected"
	case StreamRefused:
		return "refused"
	}
	return "StreamEventKind(" + strconv.Itoa(int(k)) + ")"
}

// StreamEvent is what a stream hands its consumer: a price, or news of the
// connection. Kind says which fields are set.
type StreamEvent struct {
	Kind StreamEventKind
	// Price is a StreamPrice's price.
	Price *Price
	// MarketIDs: StreamSubscribed's accepted ids, StreamUnsubscribed's ids.
	MarketIDs []string
	// Missing: StreamSubscribed's ids that are not served.
	Missing []string
	// Reconnect: a StreamConnected after the first; Resubscribe: a
	// StreamSubscribed of every market after a reconnect.
	Reconnect, Resubscribe bool
	// Err: why a StreamDisconnected, the *StreamCommandError of a
	// StreamRefused.
	Err error
	// RetryIn and Attempts: a StreamDisconnected's wait before the next
	// attempt and the failures in a row so far.
	RetryIn  time.Duration
	Attempts int
}

// streamSilence is how long a connection may stay silent, not even a
// ping (the server pings every 15 s), before the stream drops it.
const streamSilence = 45 * time.Second

// streamReadLimit bounds one server message: an ack of 500 ids is some
// 34 KB, a price well under that.
const streamReadLimit = 1 << 20

// streamWriteTimeout bounds the write of one command.
const streamWriteTimeout = 10 * time.Second

// Stream is a price stream (GET /public/v1/stream, contract §3): one
// WebSocket, subscribed to a set of markets, that the client reconnects
// by itself. Read it with Next or Events from one goroutine; Subscribe,
// Unsubscribe and Close may be called from any.
//
// The client reads the connection continuously, whatever the consumer
// does, so the server never closes it as a slow reader (4008): prices
// wait in the Stream, at most one per market, the newest (an older one
// waiting is replaced where it stands in the order). A consumer never gets
// an older version of a market after a newer one, nor the same price
// twice, across reconnects too.
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
// market ids; more can be subscribed later). It returns once the first
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
		if !validID(id) {
			return nil, fmt.Errorf("client: Stream: %q is not a market id", id)
		}
		markets[id] = struct{}{}
	}
	if len(markets) > MaxStreamMarkets {
		return nil, fmt.Errorf("client: Stream: %d markets, at most %d", len(markets), MaxStreamMarkets)
	}
	s := &Stream{c: c, silence: streamSilence, strict: streamStrict.Load(), markets: markets,
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

// dial opens one connection; a refused upgrade is an *Error.
func (s *Stream) dial(ctx context.Context, heard *atomic.Int64) (*websocket.Conn, error) {
	u := *s.c.base
	u.Path += "/public/v1/stream"
	h := http.Header{}
	h.Set("Authorization", "Bearer "+s.c.key)
	if s.c.userAgent != "" {
		h.Set("User-Agent", s.c.userAgent)
	}
	if s.c.hc.Timeout == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	heard.Store(time.Now().UnixNano())
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient: s.c.hc,
		HTTPHeader: h,
		OnPingReceived: func(context.Context, []byte) bool {
			heard.Store(time.Now().UnixNano())
			return true
		},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, streamUpgradeError(resp)
		}
		return nil, fmt.Errorf("marketdata: stream: %w", err)
	}
	conn.SetReadLimit(streamReadLimit)
	return conn, nil
}

// streamUpgradeError is the *Error of a refused upgrade.
func streamUpgradeError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.Body != nil {
		if json.NewDecoder(resp.Body).Decode(&body) == nil {
			e.Code, e.Message = body.Error.Code, body.Error.Message
		}
	}
	if e.Code == "" {
		e.Code, e.Message = "unexpected_status", "the stream's upgrade was answered "+resp.Status
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(ra); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	return e
}

// retryWait says whether err is worth another attempt, and after how
// long: a 429's Retry-After (if within WithMaxRetryAfter), a 502/503/504's
// if it gave one, else the backoff of attempt n.
func (s *Stream) retryWait(err error, n int) (time.Duration, bool) {
	backoff := streamBackoff(n, s.c.minBackoff, s.c.maxBackoff, rand.Float64())
	var e *Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusTooManyRequests:
			if e.RetryAfter > s.c.maxRetryAfter {
				return 0, false
			}
			if e.RetryAfter > 0 {
				// A little jitter, so that the refused come back apart.
				return e.RetryAfter + time.Duration(rand.Int64N(int64(s.c.minBackoff))), true
			}
			return backoff, true
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			if e.RetryAfter > 0 && e.RetryAfter <= s.c.maxRetryAfter {
				return e.RetryAfter, true
			}
			return backoff, true
		}
		return 0, false
	}
	var ce *StreamClosedError
	if errors.As(err, &ce) && (ce.Code == CloseKeyRevoked || ce.Code == CloseAccessWithdrawn) {
		return 0, false
	}
	return backoff, true
}

// run serves connections until the stream ends.
func (s *Stream) run(conn *websocket.Conn, heard *atomic.Int64) {
	defer close(s.done)
	attempts := 0
	reconnect := false
	for {
		began := time.Now()
		err := s.serve(conn, heard, reconnect)
		reconnect = true
		if s.ctx.Err() != nil {
			s.finish(nil, false)
			return
		}
		if _, retry := s.retryWait(err, 0); !retry {
			s.finish(err, true)
			return
		}
		// A connection that lasted starts the backoff over; one that is
		// lost at once (a node that accepts and closes) does not.
		if time.Since(began) >= s.c.maxBackoff {
			attempts = 0
		}
		for {
			wait, retry := s.retryWait(err, attempts)
			if !retry {
				s.finish(err, true)
				return
			}
			attempts++
			s.event(StreamEvent{Kind: StreamDisconnected, Err: err, RetryIn: wait, Attempts: attempts})
			if !sleepCtx(s.ctx, wait) {
				s.finish(nil, false)
				return
			}
			heard = new(atomic.Int64)
			conn, err = s.dial(s.ctx, heard)
			if err == nil {
				break
			}
			if s.ctx.Err() != nil {
				s.finish(nil, false)
				return
			}
		}
	}
}

// serve subscribes conn to every market and reads it until it ends; it
// returns why.
func (s *Stream) serve(conn *websocket.Conn, heard *atomic.Int64, reconnect bool) error {
	s.writeMu.Lock()
	s.mu.Lock()
	s.conn, s.cmds = conn, nil
	ids := s.marketList()
	if len(ids) > 0 {
		s.cmds = append(s.cmds, streamCmd{op: "subscribe", ids: ids, resub: reconnect})
	}
	s.push(StreamEvent{Kind: StreamConnected, Reconnect: reconnect})
	s.mu.Unlock()
	var werr error
	if len(ids) > 0 {
		werr = writeStreamCommand(s.ctx, conn, "subscribe", ids)
	}
	s.writeMu.Unlock()

	defer func() {
		s.mu.Lock()
		s.conn, s.cmds = nil, nil
		s.mu.Unlock()
	}()
	if werr != nil {
		conn.CloseNow() //nolint:errcheck // it is lost either way
		if s.ctx.Err() != nil {
			return nil
		}
		return werr
	}

	// The watcher: ctx's end closes the connection (1000), and so does
	// a connection silent for longer than the server's pings allow.
	ended := make(chan struct{})
	defer close(ended)
	var silent atomic.Bool
	go func() {
		tick := time.NewTicker(min(5*time.Second, s.silence/3))
		defer tick.Stop()
		for {
			select {
			case <-ended:
				return
			case <-s.ctx.Done():
				conn.Close(websocket.StatusNormalClosure, "the client is done") //nolint:errcheck // closing either way
				return
			case <-tick.C:
				if time.Since(time.Unix(0, heard.Load())) > s.silence {
					silent.Store(true)
					conn.CloseNow() //nolint:errcheck // closing either way
					return
				}
			}
		}
	}()

	var seq seqCheck
	for {
		typ, data, err := conn.Read(context.Background())
		if err != nil {
			if silent.Load() {
				return errStreamSilent
			}
			if s.ctx.Err() != nil {
				return nil
			}
			if code := websocket.CloseStatus(err); code != -1 {
				var ce websocket.CloseError
				errors.As(err, &ce)
				return &StreamClosedError{Code: int(code), Reason: ce.Reason}
			}
			return fmt.Errorf("marketdata: stream: %w", err)
		}
		heard.Store(time.Now().UnixNano())
		err = s.handle(&seq, typ, data)
		if err != nil {
			conn.CloseNow() //nolint:errcheck // dropped either way
			return err
		}
	}
}

// StreamProtocolError is a message from the server the client cannot
// take (not JSON of the contract's shape, an answer to no command): the
// stream drops the connection and opens a new one.
type StreamProtocolError struct {
	Reason string
}

func (e *StreamProtocolError) Error() string {
	return "marketdata: stream protocol error: " + e.Reason + "; reconnecting"
}

// handle takes one message.
func (s *Stream) handle(seq *seqCheck, typ websocket.MessageType, data []byte) error {
	if typ != websocket.MessageText {
		return &StreamProtocolError{Reason: "a binary message"}
	}
	m, err := parseStreamMessage(data, s.strict)
	if err != nil {
		return &StreamProtocolError{Reason: err.Error()}
	}
	if err := seq.check(m.Seq); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Type {
	case MessagePrice:
		if _, ok := s.markets[m.MarketID]; ok && s.q.offer(m.Price) {
			s.signal()
		}
		return nil
	case MessageSubscribed, MessageUnsubscribed, MessageError:
	default:
		return nil // a message type of a newer server
	}
	if len(s.cmds) == 0 {
		return &StreamProtocolError{Reason: "a " + m.Type + " message answers no command"}
	}
	cmd := s.cmds[0]
	s.cmds = s.cmds[1:]
	switch m.Type {
	case MessageSubscribed:
		if cmd.op != "subscribe" {
			return &StreamProtocolError{Reason: "a subscribed message answers an " + cmd.op}
		}
		for _, id := range m.Missing {
			delete(s.markets, id)
			s.q.forget(id)
		}
		s.push(StreamEvent{Kind: StreamSubscribed, MarketIDs: m.MarketIDs, Missing: m.Missing, Resubscribe: cmd.resub})
	case MessageUnsubscribed:
		if cmd.op != "unsubscribe" {
			return &StreamProtocolError{Reason: "an unsubscribed message answers a " + cmd.op}
		}
		s.push(StreamEvent{Kind: StreamUnsubscribed, MarketIDs: m.MarketIDs})
	case MessageError:
		if cmd.op == "subscribe" {
			if m.Code == "unavailable" {
				s.resubscribeLater(s.conn, cmd.ids)
			} else {
				for _, id := range cmd.ids {
					delete(s.markets, id)
					s.q.forget(id)
				}
			}
		}
		s.push(StreamEvent{Kind: StreamRefused, Err: &StreamCommandError{
			Op: cmd.op, MarketIDs: cmd.ids, Code: m.Code, Message: m.Message}})
	}
	return nil
}

// resubscribeLater subscribes ids again on conn after a backoff (the
// server could not read their prices); s.mu is held. A reconnect meanwhile
// subscribes them anyway.
func (s *Stream) resubscribeLater(conn *websocket.Conn, ids []string) {
	time.AfterFunc(streamBackoff(1, s.c.minBackoff, s.c.maxBackoff, rand.Float64()), func() {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
		s.mu.Lock()
		if s.conn != conn || s.err != nil {
			s.mu.Unlock()
			return
		}
		var again []string
		for _, id := range ids {
			if _, ok := s.markets[id]; ok {
				again = append(again, id)
			}
		}
		if len(again) > 0 {
			s.cmds = append(s.cmds, streamCmd{op: "subscribe", ids: again})
		}
		s.mu.Unlock()
		if len(again) > 0 {
			if err := writeStreamCommand(s.ctx, conn, "subscribe", again); err != nil {
				conn.CloseNow() //nolint:errcheck // the reconnect subscribes them
			}
		}
	})
}

// writeStreamCommand sends one command.
func writeStreamCommand(ctx context.Context, conn *websocket.Conn, op string, ids []string) error {
	b, err := json.Marshal(struct {
		Op        string   `json:"op"`
		MarketIDs []string `json:"market_ids"`
	}{op, ids})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, streamWriteTimeout)
	defer cancel()
	if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("marketdata: stream: send %s: %w", op, err)
	}
	return nil
}

// Subscribe adds markets to the stream: it sends a subscribe of those not
// subscribed yet on the open connection (or the next one, if none is
// open). Its answer comes as a StreamSubscribed event, then the current
// price of each accepted market. An id that is not a market id, or more
// than MaxStreamMarkets markets in all, is refused here and nothing is
// subscribed. It returns an error once the stream has ended.
func (s *Stream) Subscribe(ids ...string) error {
	for _, id := range ids {
		if !validID(id) {
			return fmt.Errorf("client: Subscribe: %q is not a market id", id)
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	var fresh []string
	for _, id := range ids {
		if _, ok := s.markets[id]; !ok && !slices.Contains(fresh, id) {
			fresh = append(fresh, id)
		}
	}
	if n := len(s.markets) + len(fresh); n > MaxStreamMarkets {
		s.mu.Unlock()
		return fmt.Errorf("client: Subscribe: that would make %d markets, at most %d", n, MaxStreamMarkets)
	}
	for _, id := range fresh {
		s.markets[id] = struct{}{}
	}
	conn := s.conn
	if conn != nil && len(fresh) > 0 {
		s.cmds = append(s.cmds, streamCmd{op: "subscribe", ids: fresh})
	}
	s.mu.Unlock()
	if conn != nil && len(fresh) > 0 {
		if err := writeStreamCommand(s.ctx, conn, "subscribe", fresh); err != nil {
			conn.CloseNow() //nolint:errcheck // the reconnect subscribes them
		}
	}
	return nil
}

// Unsubscribe drops markets from the stream: nothing more is handed out
// for them from now on (a price of theirs waiting is dropped), and an
// unsubscribe is sent on the open connection; its answer comes as a
// StreamUnsubscribed event. Ids the stream does not have are ignored.
func (s *Stream) Unsubscribe(ids ...string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	var gone []string
	for _, id := range ids {
		if _, ok := s.markets[id]; ok {
			delete(s.markets, id)
			s.q.forget(id)
			gone = append(gone, id)
		}
	}
	conn := s.conn
	if conn != nil && len(gone) > 0 {
		s.cmds = append(s.cmds, streamCmd{op: "unsubscribe", ids: gone})
	}
	s.mu.Unlock()
	if conn != nil && len(gone) > 0 {
		if err := writeStreamCommand(s.ctx, conn, "unsubscribe", gone); err != nil {
			conn.CloseNow() //nolint:errcheck // the next connection does not subscribe them
		}
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

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

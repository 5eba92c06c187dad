package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// streamSilence is how long a connection may stay silent, not even a
// ping (the server pings every 15 s), before the stream drops it.
var streamSilence atomic.Int64 // time.Duration; a test shortens it

func init() { streamSilence.Store(int64(45 * time.Second)) }

// streamReadLimit bounds one server message: an ack of 500 ids is some
// 34 KB, a price well under that.
const streamReadLimit = 1 << 20

// streamWriteTimeout bounds the write of one command.
const streamWriteTimeout = 10 * time.Second

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
	// As a REST answer's: seconds (capped, never wrapped) or an HTTP date.
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
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
	// Not cancelled with the stream: the library closes the connection at
	// once, with no close frame, when a write's context ends before the
	// write has returned, so a stream cancelled just after a subscribe was
	// cut (the server saw 1006) instead of closed with 1000 by the watcher,
	// which waits for the write. The timeout still bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), streamWriteTimeout)
	defer cancel()
	if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("marketdata: stream: send %s: %w", op, err)
	}
	return nil
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

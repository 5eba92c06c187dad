package client

import (
	"errors"
	"fmt"
	"strconv"
	"time"
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
	// Merged counts the events of the same kind this one stands for
	// besides itself, folded into it while they waited for a consumer
	// that did not read (see Stream): 0 unless the consumer fell behind.
	Merged int
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

// Package stream is the node side of the price streams (contract §3,
// "Streams"): WebSocket connections that subscribe to markets, get the
// current price of each on subscribe and then every committed change, in
// version order per market, conflated for clients that read slowly.
//
// A Hub holds the node's connections and their subscriptions, sharded by
// market. It follows the read path's change notices (cache.Reader.OnChange):
// the price items a notice carries of markets some connection here
// subscribes to go to the fan-out worker that owns the market, which hands
// the same bytes to every subscriber, with no read; only a market named
// without its item is read (one batched read through the Reader). Each
// connection keeps, per market, only the newest version waiting to be
// written, so what it holds is bounded by its subscriptions whatever the
// rate; one writer at a time frames what waits and writes it in one write. The api package does the front door and the upgrade, and
// closes connections whose key is revoked or whose access is withdrawn.
package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/marketdata/marketdata/store"
)

// Op is a client command's operation.
type Op int

// The operations a client may send.
const (
	OpSubscribe Op = iota + 1
	OpUnsubscribe
)

func (o Op) String() string {
	switch o {
	case OpSubscribe:
		return "subscribe"
	case OpUnsubscribe:
		return "unsubscribe"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// MaxMarkets is how many markets one connection may subscribe to
// (contract: "more than 500 market ids subscribed on one connection" is
// refused).
const MaxMarkets = 500

// MaxCommandBytes bounds one client message: some 3,800 ids of 64 bytes,
// so that a subscribe of too many ids (twice 500, say) is answered with
// an error message; a longer message closes the connection (1009, the
// WebSocket library's read limit).
const MaxCommandBytes = 256 << 10

// Command is one parsed client command.
type Command struct {
	Op Op
	// MarketIDs are the command's ids, each valid, duplicates removed, in
	// the order first given.
	MarketIDs []string
}

// CommandError is a command the node refuses: its message says what was
// wrong, and the connection answers it with an error message.
type CommandError struct{ Message string }

func (e *CommandError) Error() string { return e.Message }

// wireCommand is a command as sent; fields are pointers and raw so that a
// missing field and a field of the wrong type get their own messages.
type wireCommand struct {
	Op        *string         `json:"op"`
	MarketIDs json.RawMessage `json:"market_ids"`
}

// ParseCommand reads one client message. Unknown fields are ignored (as
// unknown query parameters are); everything else that is not a subscribe of
// 1 to MaxMarkets valid ids or an unsubscribe of at least one is a
// *CommandError.
func ParseCommand(data []byte) (Command, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return Command{}, &CommandError{"a command is a JSON object: {\"op\":\"subscribe\",\"market_ids\":[...]}"}
	}
	var w wireCommand
	if err := json.Unmarshal(data, &w); err != nil {
		return Command{}, &CommandError{"the command is not valid JSON of the form {\"op\":\"subscribe\",\"market_ids\":[...]}"}
	}
	var c Command
	switch {
	case w.Op == nil:
		return Command{}, &CommandError{"the command has no \"op\": send \"subscribe\" or \"unsubscribe\""}
	case *w.Op == "subscribe":
		c.Op = OpSubscribe
	case *w.Op == "unsubscribe":
		c.Op = OpUnsubscribe
	default:
		return Command{}, &CommandError{"unknown op " + quote(*w.Op, 32) + ": send \"subscribe\" or \"unsubscribe\""}
	}
	raw := bytes.TrimSpace(w.MarketIDs)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Command{}, &CommandError{"the command has no \"market_ids\": send an array of 1 to " + strconv.Itoa(MaxMarkets) + " market ids"}
	}
	var ids []string
	if err := json.Unmarshal(raw, &ids); err != nil {
		return Command{}, &CommandError{"\"market_ids\" must be an array of strings"}
	}
	if len(ids) == 0 {
		return Command{}, &CommandError{"\"market_ids\" is empty: send 1 to " + strconv.Itoa(MaxMarkets) + " market ids"}
	}
	seen := make(map[string]struct{}, len(ids))
	out := ids[:0]
	for _, id := range ids {
		if !store.ValidID(id) {
			return Command{}, &CommandError{"market id " + quote(id, store.MaxIDLen) + " does not match " + store.IDPattern}
		}
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		out = append(out, id)
	}
	if c.Op == OpSubscribe && len(out) > MaxMarkets {
		return Command{}, &CommandError{fmt.Sprintf("%d market ids in one command: at most %d may be subscribed on one connection", len(out), MaxMarkets)}
	}
	c.MarketIDs = out
	return c, nil
}

// quote is s as a JSON string for a message, cut to max bytes: a message
// never carries more of the client's text than that.
func quote(s string, max int) string {
	if len(s) > max {
		s = s[:max] + "…"
	}
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// Messages the node sends, without their "type" and "seq", which the writer
// puts first (frames.go): each is the rest of the object, from the comma
// after seq to the closing brace.

// subscribedRest is a subscribe's acknowledgement.
func subscribedRest(accepted, missing []string) []byte {
	b := []byte(`,"market_ids":`)
	b = appendIDs(b, accepted)
	b = append(b, `,"missing":`...)
	b = appendIDs(b, missing)
	return append(b, '}')
}

// unsubscribedRest is an unsubscribe's acknowledgement.
func unsubscribedRest(ids []string) []byte {
	b := []byte(`,"market_ids":`)
	b = appendIDs(b, ids)
	return append(b, '}')
}

// errorRest is an error message with the contract's code.
func errorRest(code, message string) []byte {
	b := []byte(`,"code":`)
	b = strconv.AppendQuote(b, code)
	b = append(b, `,"message":`...)
	m, _ := json.Marshal(message) // a string always marshals
	b = append(b, m...)
	return append(b, '}')
}

// appendIDs appends ids as a JSON array; ids match store.IDPattern, so
// they need no escaping.
func appendIDs(b []byte, ids []string) []byte {
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, id...)
		b = append(b, '"')
	}
	return append(b, ']')
}

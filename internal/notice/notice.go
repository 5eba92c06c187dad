// Package notice defines the messages our own processes send each other on
// NATS core subjects (not JetStream): what changed, so that every API node
// drops what it holds of it. It is the one home of these messages' types and
// of their default subjects; publishers and subscribers both import it.
package notice

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	json "github.com/segmentio/encoding/json"
)

// Default subjects (contract §1 names none of them; operators may change
// them with flags, which must then agree on every process).
const (
	// ChangeSubject carries a Change after each committed ingest batch,
	// anti-entropy repair and cache rebuild.
	ChangeSubject = "md.changes.v1"
	// KeySubject carries a Key after every key or access change.
	KeySubject = "md.keys.v1"
	// PresenceSubject carries API node heartbeats.
	PresenceSubject = "md.api.presence"
)

// Change names the ids whose cached documents were rewritten in Redis.
type Change struct {
	// Seq is the cache's change sequence the writer took before it wrote
	// (cache.Cache.Apply); 0 when the writer took none.
	Seq int64 `json:"seq,omitempty"`
	// Events whose event document or listing entry was rewritten.
	Events []string `json:"events,omitempty"`
	// Markets whose price item was rewritten.
	Markets []string `json:"markets,omitempty"`
	// Prices carries the price items of Markets as the writer rendered and
	// wrote them, so that a node updates its replica (and streams fan out)
	// without reading Redis. A market in Markets without an entry here is
	// read from Redis by whoever needs it.
	Prices []Price `json:"prices,omitempty"`
	// Trades lists markets that received new trades.
	Trades []string `json:"trades,omitempty"`
	// Flush says the cache was rebuilt from Postgres: readers drop all they
	// hold from it, whatever the lists say.
	Flush bool `json:"flush,omitempty"`
}

// Price is one market's price item as its writer wrote it to Redis.
type Price struct {
	ID string `json:"id"`
	// Rev is the market document's revision (store doc_revs): a node keeps
	// an item only when its Rev is above the one it holds.
	Rev int64 `json:"g"`
	// Served: the market is in the served set.
	Served bool `json:"s,omitempty"`
	// Body is the wire JSON of the price item; absent until a price arrives.
	Body json.RawMessage `json:"b,omitempty"`
}

// Encode is the message body of c.
func (c Change) Encode() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("notice: encode change: %v", err)) // strings and bools only
	}
	return b
}

// EncodeWithin is Encode for a message of at most max bytes (the NATS
// server's max_payload; 0 or less: no bound): a notice whose items do not
// fit goes without them (Prices nil), and its readers read the markets it
// names from Redis instead.
func (c Change) EncodeWithin(max int64) []byte {
	b := c.Encode()
	if max > 0 && int64(len(b)) > max && c.Prices != nil {
		c.Prices = nil
		b = c.Encode()
	}
	return b
}

// DecodeChange reads a Change message.
func DecodeChange(data []byte) (Change, error) {
	var c Change
	if err := json.Unmarshal(data, &c); err != nil {
		return Change{}, fmt.Errorf("notice: decode change: %w", err)
	}
	return c, nil
}

// Key says a key or a whole account changed (revoked, created, access
// granted or withdrawn): nodes drop what they cached of it.
type Key struct {
	AccountID string `json:"account_id,omitempty"`
	KeyID     string `json:"key_id,omitempty"`
}

// Encode is the message body of k.
func (k Key) Encode() []byte {
	b, err := json.Marshal(k)
	if err != nil {
		panic(fmt.Sprintf("notice: encode key: %v", err))
	}
	return b
}

// ErrEmptyKey is a Key notice that names neither an account nor a key.
var ErrEmptyKey = errors.New("notice: key notice names no account and no key")

// DecodeKey reads a Key message.
func DecodeKey(data []byte) (Key, error) {
	var k Key
	if err := json.Unmarshal(data, &k); err != nil {
		return Key{}, fmt.Errorf("notice: decode key: %w", err)
	}
	if k.AccountID == "" && k.KeyID == "" {
		return Key{}, ErrEmptyKey
	}
	return k, nil
}

// Publish sends data on subject and waits (bounded) until the server has
// it. While NATS reconnects the message waits in the client's buffer and
// goes out after, which is all a publisher can want: that is not an error.
func Publish(nc *nats.Conn, subject string, data []byte) error {
	if err := nc.Publish(subject, data); err != nil {
		return fmt.Errorf("notice: publish on %s: %w", subject, err)
	}
	if err := nc.FlushTimeout(2 * time.Second); err != nil && !nc.IsReconnecting() {
		return fmt.Errorf("notice: flush %s: %w", subject, err)
	}
	return nil
}

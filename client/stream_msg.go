package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// StreamMessage is one message a stream's server sends (contract §3,
// "Streams"), as sent. Type says which fields are set:
//
//   - "subscribed": MarketIDs (accepted) and Missing (not served);
//   - "unsubscribed": MarketIDs;
//   - "error": Code ("invalid_request" or "unavailable") and Message;
//   - "price": Price.
//
// Seq numbers the messages of one connection 1, 2, 3, … without a gap.
// Most programs never see a StreamMessage: (*Client).Stream turns them into
// StreamEvents. It is exported for programs and tests that speak the
// protocol themselves.
type StreamMessage struct {
	Type      string   `json:"type"`
	Seq       int64    `json:"seq"`
	MarketIDs []string `json:"market_ids"`
	Missing   []string `json:"missing"`
	Code      string   `json:"code,omitempty"`
	Message   string   `json:"message,omitempty"`
	// Price is the price message's fields (market_id, event_id, …, at the
	// top level of the object); nil for the other types.
	*Price
}

// The message types of contract §3.
const (
	MessageSubscribed   = "subscribed"
	MessageUnsubscribed = "unsubscribed"
	MessageError        = "error"
	MessagePrice        = "price"
)

// MaxStreamMarkets is how many markets one stream may subscribe to
// (contract §3: the server refuses more than 500 on one connection).
const MaxStreamMarkets = 500

// ParseStreamMessage decodes and checks one server message: a JSON object
// with a type and a seq ≥ 1, and for each known type the fields the
// contract says it has (a price names a valid market and event, a status,
// quotes, a version ≥ 1 and updated_at). Fields it does not know are
// ignored, so that a server that adds one does not break its clients; a
// type it does not know is returned as is (a stream skips it).
func ParseStreamMessage(data []byte) (StreamMessage, error) {
	return parseStreamMessage(data, false)
}

// parseStreamMessage is ParseStreamMessage; strict refuses fields the
// client's types do not have (the tests decode every message the real
// server sends that way, so a field the client would drop is caught).
func parseStreamMessage(data []byte, strict bool) (StreamMessage, error) {
	var m StreamMessage
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return m, errors.New("a stream message is a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&m); err != nil {
		return StreamMessage{}, fmt.Errorf("stream message: %w", err)
	}
	if dec.More() {
		return StreamMessage{}, errors.New("stream message: data after the object")
	}
	if err := m.check(); err != nil {
		return StreamMessage{}, err
	}
	return m, nil
}

func (m *StreamMessage) check() error {
	if m.Type == "" {
		return errors.New("stream message: no type")
	}
	if m.Seq < 1 {
		return fmt.Errorf("stream message %q: seq %d, want ≥ 1", m.Type, m.Seq)
	}
	switch m.Type {
	case MessagePrice:
		p := m.Price
		switch {
		case p == nil:
			return errors.New("stream message price: no price fields")
		case !validID(p.MarketID):
			return fmt.Errorf("stream message price: market_id %q is not a market id", p.MarketID)
		case !validID(p.EventID):
			return fmt.Errorf("stream message price of %s: event_id %q is not an event id", p.MarketID, p.EventID)
		case p.Status == "":
			return fmt.Errorf("stream message price of %s: no status", p.MarketID)
		case p.Quotes == nil:
			return fmt.Errorf("stream message price of %s: no quotes", p.MarketID)
		case p.Version < 1:
			return fmt.Errorf("stream message price of %s: version %d, want ≥ 1", p.MarketID, p.Version)
		case p.UpdatedAt.IsZero():
			return fmt.Errorf("stream message price of %s: no updated_at", p.MarketID)
		}
		return nil
	case MessageSubscribed:
		if m.MarketIDs == nil || m.Missing == nil {
			return errors.New("stream message subscribed: want market_ids and missing")
		}
	case MessageUnsubscribed:
		if m.MarketIDs == nil {
			return errors.New("stream message unsubscribed: want market_ids")
		}
	case MessageError:
		if m.Code == "" {
			return errors.New("stream message error: no code")
		}
	}
	if m.Price != nil {
		return fmt.Errorf("stream message %q: price fields in a message that is not a price", m.Type)
	}
	return nil
}

// validID says whether id matches [A-Za-z0-9_-]{1,64}, the pattern of
// every universal id (contract §4).
func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

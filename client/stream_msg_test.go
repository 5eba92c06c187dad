package client

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Messages as api/stream writes them (docs/streams.md).
const (
	msgSubscribed = `{"type":"subscribed","seq":1,"market_ids":["m-1","m-2"],"missing":["nope"]}`
	msgPrice      = `{"type":"price","seq":2,"market_id":"m-1","event_id":"ev-1","status":"active",` +
		`"quotes":{"venue_a":{"bid":0.41,"ask":0.45,"last":null,"volume_24h":120.5},"venue_b":{"bid":0.4,"ask":0.44,"last":0.42,"volume_24h":3}},` +
		`"best_bid":0.41,"best_ask":0.44,"version":7,"updated_at":"2026-11-24T09:00:00.123456Z"}`
	msgUnsubscribed = `{"type":"unsubscribed","seq":3,"market_ids":["m-2"]}`
	msgError        = `{"type":"error","seq":4,"code":"invalid_request","message":"market id \"a b\" does not match [A-Za-z0-9_-]{1,64}"}`
)

func TestParseStreamMessage(t *testing.T) {
	m, err := parseStreamMessage([]byte(msgPrice), true)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Price
	if m.Type != MessagePrice || m.Seq != 2 || p == nil || p.MarketID != "m-1" || p.EventID != "ev-1" ||
		p.Status != "active" || p.Version != 7 || *p.BestBid != 0.41 || *p.BestAsk != 0.44 ||
		!p.UpdatedAt.Equal(time.Date(2026, 11, 24, 9, 0, 0, 123456000, time.UTC)) ||
		len(p.Quotes) != 2 || p.Quotes["venue_a"].Last != nil || *p.Quotes["venue_b"].Last != 0.42 ||
		p.Quotes["venue_a"].Volume24h != 120.5 {
		t.Fatalf("price decoded as %+v %+v", m, p)
	}
	m, err = parseStreamMessage([]byte(msgSubscribed), true)
	if err != nil || m.Type != MessageSubscribed || len(m.MarketIDs) != 2 || len(m.Missing) != 1 || m.Price != nil {
		t.Fatalf("subscribed decoded as %+v, %v", m, err)
	}
	m, err = parseStreamMessage([]byte(`{"type":"subscribed","seq":9,"market_ids":[],"missing":[]}`), true)
	if err != nil || m.MarketIDs == nil || m.Missing == nil {
		t.Fatalf("empty subscribed decoded as %+v, %v", m, err)
	}
	m, err = parseStreamMessage([]byte(msgUnsubscribed), true)
	if err != nil || m.Type != MessageUnsubscribed || len(m.MarketIDs) != 1 {
		t.Fatalf("unsubscribed decoded as %+v, %v", m, err)
	}
	m, err = parseStreamMessage([]byte(msgError), true)
	if err != nil || m.Code != "invalid_request" || !strings.Contains(m.Message, "a b") {
		t.Fatalf("error decoded as %+v, %v", m, err)
	}
	// A type of a newer server is returned as is.
	m, err = parseStreamMessage([]byte(`{"type":"notice","seq":5}`), true)
	if err != nil || m.Type != "notice" {
		t.Fatalf("unknown type decoded as %+v, %v", m, err)
	}
}

func TestParseStreamMessageUnknownFields(t *testing.T) {
	for _, raw := range []string{
		strings.Replace(msgPrice, `"version":7`, `"version":7,"extra":1`, 1),
		strings.Replace(msgPrice, `"volume_24h":3`, `"volume_24h":3,"depth":9`, 1),
		strings.Replace(msgSubscribed, `"seq":1`, `"seq":1,"node":"a"`, 1),
	} {
		if _, err := parseStreamMessage([]byte(raw), true); err == nil {
			t.Errorf("strict decoding took %s", raw)
		}
		// A client in production takes a field a newer server adds.
		if _, err := ParseStreamMessage([]byte(raw)); err != nil {
			t.Errorf("lenient decoding refused %s: %v", raw, err)
		}
	}
}

func TestParseStreamMessageRefuses(t *testing.T) {
	for _, raw := range []string{
		``, `null`, `[]`, `"price"`, `{`, `{"type":"price","seq":1}{}`,
		`{"seq":1}`,
		`{"type":"subscribed"}`,
		`{"type":"subscribed","seq":0,"market_ids":[],"missing":[]}`,
		`{"type":"subscribed","seq":"1","market_ids":[],"missing":[]}`,
		`{"type":"subscribed","seq":1,"market_ids":["a"]}`,
		`{"type":"unsubscribed","seq":1}`,
		`{"type":"error","seq":1,"message":"x"}`,
		`{"type":"subscribed","seq":1,"market_ids":[],"missing":[],"version":3}`,
		strings.Replace(msgPrice, `"market_id":"m-1"`, `"market_id":"m 1"`, 1),
		strings.Replace(msgPrice, `"event_id":"ev-1"`, `"event_id":""`, 1),
		strings.Replace(msgPrice, `"version":7`, `"version":0`, 1),
		strings.Replace(msgPrice, `"version":7`, `"version":7.5`, 1),
		strings.Replace(msgPrice, `"status":"active",`, ``, 1),
		strings.Replace(msgPrice, `"updated_at":"2026-11-24T09:00:00.123456Z"`, `"updated_at":"yesterday"`, 1),
		strings.Replace(msgPrice, `"best_bid":0.41`, `"best_bid":"0.41"`, 1),
		`{"type":"price","seq":2,"market_id":"m-1","event_id":"ev-1","status":"active","version":1,"updated_at":"2026-11-24T09:00:00Z"}`,
	} {
		if m, err := ParseStreamMessage([]byte(raw)); err == nil {
			t.Errorf("took %q as %+v", raw, m)
		}
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "A-z_09": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a b": false, "é": false, "a/b": false, "a.b": false,
	} {
		if validID(id) != want {
			t.Errorf("validID(%q) = %v", id, !want)
		}
	}
}

// FuzzParseStreamMessage: no input panics the decoder, and what it takes
// survives a round trip (marshalled again, it parses to the same bytes).
func FuzzParseStreamMessage(f *testing.F) {
	for _, s := range []string{msgSubscribed, msgPrice, msgUnsubscribed, msgError, `{"type":"notice","seq":5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, strict := range []bool{false, true} {
			m, err := parseStreamMessage(data, strict)
			if err != nil {
				continue
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("%+v does not marshal: %v", m, err)
			}
			m2, err := parseStreamMessage(b, true)
			if err != nil {
				t.Fatalf("%s (from %q) does not parse again: %v", b, data, err)
			}
			b2, _ := json.Marshal(m2)
			if !bytes.Equal(b, b2) {
				t.Fatalf("round trip of %q: %s then %s", data, b, b2)
			}
		}
	})
}

package stream

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/store"
)

func TestParseCommand(t *testing.T) {
	ok := []struct {
		in   string
		want Command
	}{
		{`{"op":"subscribe","market_ids":["a","b","a"]}`, Command{OpSubscribe, []string{"a", "b"}}},
		{` {"market_ids":["x-1_Y"],"op":"unsubscribe","extra":{"n":1}} `, Command{OpUnsubscribe, []string{"x-1_Y"}}},
	}
	for _, tc := range ok {
		got, err := ParseCommand([]byte(tc.in))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseCommand(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	tooMany, _ := json.Marshal(map[string]any{"op": "subscribe", "market_ids": uniq(MaxMarkets + 1)})
	manyOut, _ := json.Marshal(map[string]any{"op": "unsubscribe", "market_ids": uniq(MaxMarkets + 1)})
	if c, err := ParseCommand(manyOut); err != nil || len(c.MarketIDs) != MaxMarkets+1 {
		t.Errorf("an unsubscribe of %d ids: %v; the limit is on subscriptions only", MaxMarkets+1, err)
	}
	bad := map[string]string{
		``: "JSON object", `[1]`: "JSON object", `{"op":1,"market_ids":["a"]}`: "not valid JSON",
		`{"market_ids":["a"]}`: `no "op"`, `{"op":"SUBSCRIBE","market_ids":["a"]}`: `unknown op "SUBSCRIBE"`,
		`{"op":"subscribe"}`: `no "market_ids"`, `{"op":"subscribe","market_ids":null}`: `no "market_ids"`,
		`{"op":"subscribe","market_ids":[]}`: "empty", `{"op":"subscribe","market_ids":{"a":1}}`: "array of strings",
		`{"op":"subscribe","market_ids":["a","b c"]}`:                         `"b c" does not match`,
		`{"op":"subscribe","market_ids":["` + strings.Repeat("z", 65) + `"]}`: "does not match",
		string(tooMany): "501 market ids",
	}
	for in, want := range bad {
		_, err := ParseCommand([]byte(in))
		var ce *CommandError
		if err == nil || !strings.Contains(err.Error(), want) || !asCommandError(err, &ce) {
			t.Errorf("ParseCommand(%.80s) error %v; want a CommandError saying %q", in, err, want)
		}
	}
}

func uniq(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "m" + strings.Repeat("0", 3) + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
	}
	return out
}

func asCommandError(err error, ce **CommandError) bool {
	c, ok := err.(*CommandError)
	*ce = c
	return ok
}

// The messages the node writes are JSON objects clients can read.
func TestMessageRests(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		rest []byte
		want map[string]any
	}{
		{"subscribed", subscribedRest([]string{"a", "b"}, nil), map[string]any{"market_ids": []any{"a", "b"}, "missing": []any{}}},
		{"unsubscribed", unsubscribedRest([]string{"a"}), map[string]any{"market_ids": []any{"a"}}},
		{"error", errorRest("invalid_request", `say "no" \ now`), map[string]any{"code": "invalid_request", "message": `say "no" \ now`}},
	} {
		msg := append([]byte(`{"type":"`+tc.typ+`","seq":7`), tc.rest...)
		var got map[string]any
		if err := json.Unmarshal(msg, &got); err != nil {
			t.Fatalf("%s: %s is not JSON: %v", tc.typ, msg, err)
		}
		tc.want["type"], tc.want["seq"] = tc.typ, 7.0
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.typ, got, tc.want)
		}
	}
}

// FuzzParseCommand: any client message is either a valid command (an op,
// 1 to MaxMarkets valid ids without duplicates) or a CommandError with a
// message; never a panic.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		`{"op":"subscribe","market_ids":["a","b"]}`, `{"op":"unsubscribe","market_ids":["a"]}`,
		`{"op":"subscribe","market_ids":["a","a"]}`, `not json`, `{}`, `{"op":"x"}`, `{"op":"subscribe","market_ids":[1]}`,
		`{"op":"subscribe","market_ids":["\u0000"]}`, `{"op":"subscribe","market_ids":null,"op":"unsubscribe"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCommand(data)
		if err != nil {
			var ce *CommandError
			if !asCommandError(err, &ce) || ce.Message == "" {
				t.Fatalf("error %v is not a CommandError with a message", err)
			}
			return
		}
		if c.Op != OpSubscribe && c.Op != OpUnsubscribe {
			t.Fatalf("op %v", c.Op)
		}
		if len(c.MarketIDs) == 0 || (c.Op == OpSubscribe && len(c.MarketIDs) > MaxMarkets) {
			t.Fatalf("%d ids", len(c.MarketIDs))
		}
		seen := map[string]bool{}
		for _, id := range c.MarketIDs {
			if !store.ValidID(id) || seen[id] {
				t.Fatalf("id %q invalid or repeated", id)
			}
			seen[id] = true
		}
	})
}

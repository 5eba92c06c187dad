package notice

import (
	"errors"
	"reflect"
	"testing"
)

// TestChangeRoundTrip: what a publisher encodes, a subscriber decodes to
// the same Change, under the field names every process agrees on.
func TestChangeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		c    Change
		wire string
	}{
		{"full", Change{Seq: 42, Events: []string{"ev-1", "ev-2"}, Markets: []string{"m-1"}, Trades: []string{"m-1", "m-2"}},
			`{"seq":42,"events":["ev-1","ev-2"],"markets":["m-1"],"trades":["m-1","m-2"]}`},
		{"with prices", Change{Seq: 9, Markets: []string{"m-1", "m-2"}, Prices: []Price{
			{ID: "m-1", Rev: 12, Served: true, Body: []byte(`{"market_id":"m-1","version":3}`)}, {ID: "m-2", Rev: 13}}},
			`{"seq":9,"markets":["m-1","m-2"],"prices":[{"id":"m-1","g":12,"s":true,"b":{"market_id":"m-1","version":3}},{"id":"m-2","g":13}]}`},
		{"flush", Change{Flush: true}, `{"flush":true}`},
		{"flush with seq", Change{Seq: 7, Flush: true}, `{"seq":7,"flush":true}`},
		{"empty", Change{}, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.c.Encode()
			if string(b) != tt.wire {
				t.Errorf("Encode: got %s, want %s", b, tt.wire)
			}
			got, err := DecodeChange(b)
			if err != nil {
				t.Fatalf("DecodeChange(%s): %v", b, err)
			}
			if !reflect.DeepEqual(got, tt.c) {
				t.Errorf("round trip: got %+v, want %+v", got, tt.c)
			}
		})
	}
}

// TestDecodeChangeIgnoresUnknownFields: a newer publisher may add fields;
// an older subscriber still reads the ones it knows.
func TestDecodeChangeIgnoresUnknownFields(t *testing.T) {
	got, err := DecodeChange([]byte(`{"events":["ev-1"],"streams":["s-1"],"origin":{"node":"a"},"seq":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Change{Seq: 3, Events: []string{"ev-1"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestDecodeChangeRefusesGarbage: a body that is not a Change is an error
// the subscriber sees, not an empty notice that would silently drop nothing.
func TestDecodeChangeRefusesGarbage(t *testing.T) {
	for _, body := range []string{``, `not json`, `{"events":"ev-1"}`, `{"seq":"3"}`, `{"flush":1}`, `[1]`} {
		if c, err := DecodeChange([]byte(body)); err == nil {
			t.Errorf("DecodeChange(%q): got %+v, want an error", body, c)
		}
	}
}

// TestKeyRoundTrip: a key notice naming an account, a key or both survives
// the wire.
func TestKeyRoundTrip(t *testing.T) {
	tests := []struct {
		k    Key
		wire string
	}{
		{Key{AccountID: "acct-1"}, `{"account_id":"acct-1"}`},
		{Key{KeyID: "key-1"}, `{"key_id":"key-1"}`},
		{Key{AccountID: "acct-1", KeyID: "key-1"}, `{"account_id":"acct-1","key_id":"key-1"}`},
	}
	for _, tt := range tests {
		b := tt.k.Encode()
		if string(b) != tt.wire {
			t.Errorf("Encode(%+v): got %s, want %s", tt.k, b, tt.wire)
		}
		got, err := DecodeKey(b)
		if err != nil || got != tt.k {
			t.Errorf("DecodeKey(%s): got %+v, %v; want %+v", b, got, err, tt.k)
		}
	}
}

// TestDecodeKeyIgnoresUnknownFields: fields a newer publisher adds do not
// stop an older node from dropping the key.
func TestDecodeKeyIgnoresUnknownFields(t *testing.T) {
	got, err := DecodeKey([]byte(`{"key_id":"key-1","reason":"revoked","at":17}`))
	if err != nil || got != (Key{KeyID: "key-1"}) {
		t.Errorf("got %+v, %v; want key-1 and no error", got, err)
	}
}

// TestDecodeKeyRefusesEmpty: a key notice that names nothing is refused
// with ErrEmptyKey (dropping nothing would hide a publisher's bug); one that
// is not JSON is refused with another error.
func TestDecodeKeyRefusesEmpty(t *testing.T) {
	for _, body := range []string{`{}`, `null`, `{"account_id":"","key_id":""}`, `{"reason":"revoked"}`} {
		if k, err := DecodeKey([]byte(body)); !errors.Is(err, ErrEmptyKey) {
			t.Errorf("DecodeKey(%s): got %+v, %v; want ErrEmptyKey", body, k, err)
		}
	}
	for _, body := range []string{``, `nope`, `{"key_id":5}`} {
		k, err := DecodeKey([]byte(body))
		if err == nil || errors.Is(err, ErrEmptyKey) {
			t.Errorf("DecodeKey(%q): got %+v, %v; want a decode error", body, k, err)
		}
	}
	if b := (Key{}).Encode(); string(b) != `{}` {
		t.Errorf("empty Key encodes as %s, want {} (which DecodeKey refuses)", b)
	}
}

// TestEncodeWithin: a notice whose items would exceed the server's payload
// limit goes without them, naming the same markets; one that fits is whole.
func TestEncodeWithin(t *testing.T) {
	c := Change{Seq: 3, Markets: []string{"m-1"}, Prices: []Price{{ID: "m-1", Rev: 4, Served: true, Body: []byte(`{"v":1}`)}}}
	whole := c.Encode()
	if got := c.EncodeWithin(int64(len(whole))); string(got) != string(whole) {
		t.Errorf("fits: got %s, want %s", got, whole)
	}
	if got, want := c.EncodeWithin(0), whole; string(got) != string(want) {
		t.Errorf("no bound: got %s, want %s", got, want)
	}
	got := c.EncodeWithin(int64(len(whole) - 1))
	if want := `{"seq":3,"markets":["m-1"]}`; string(got) != want {
		t.Errorf("too big: got %s, want %s", got, want)
	}
}

// FuzzDecodeChange: decoding any bytes never panics, and a change that
// decodes survives encode then decode unchanged (what a node reads is what
// the writer meant).
func FuzzDecodeChange(f *testing.F) {
	f.Add([]byte(`{"seq":9,"markets":["m-1"],"prices":[{"id":"m-1","g":12,"s":true,"b":{"market_id":"m-1"}}]}`))
	f.Add([]byte(`{"flush":true}`))
	f.Add([]byte(`{"prices":[{"id":"x","b":null}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeChange(data)
		if err != nil {
			return
		}
		once := c.Encode()
		again, err := DecodeChange(once)
		if err != nil {
			t.Fatalf("re-decode %s: %v", once, err)
		}
		if twice := again.Encode(); string(twice) != string(once) {
			t.Fatalf("encode/decode changed the notice:\n%s\n%s", once, twice)
		}
	})
}

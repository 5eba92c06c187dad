package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/marketdata/marketdata/bench/measure"
)

// msgKind is the type of a stream server message (contract §3 "Streams").
type msgKind uint8

const (
	kindOther msgKind = iota
	kindPrice
	kindSubscribed
	kindUnsubscribed
	kindError
)

func (k msgKind) String() string {
	switch k {
	case kindPrice:
		return "price"
	case kindSubscribed:
		return "subscribed"
	case kindUnsubscribed:
		return "unsubscribed"
	case kindError:
		return "error"
	default:
		return "other"
	}
}

var (
	keyType = []byte(`"type":"`)
	keySeq  = []byte(`"seq":`)
)

// errStreamLayout is a server message scanStream cannot read.
var errStreamLayout = errors.New("stream message: layout not understood")

// streamMsg is what the load tool reads of a server message. Market aliases
// the scanned bytes.
type streamMsg struct {
	Kind    msgKind
	Seq     int64
	Market  []byte
	Version int64
}

// scanStream reads type and seq of a server message and, for a price, its
// market_id and version. At 50,000 messages a second on the node's own two
// cores the load tool cannot afford a JSON decode per message: it finds each
// key with bytes.Index, relying on the messages being compact JSON whose
// only "version" and "market_id" keys are the price's own (the quotes hold
// neither). checkStream compares it with a full decode on a sample of real
// messages, so a layout it misreads stops the benchmark as a fault instead
// of measuring wrong.
func scanStream(b []byte) (streamMsg, error) {
	var m streamMsg
	t, ok := stringAfter(b, keyType)
	if !ok {
		return m, fmt.Errorf("%w: no type in %.80q", errStreamLayout, b)
	}
	switch string(t) {
	case "price":
		m.Kind = kindPrice
	case "subscribed":
		m.Kind = kindSubscribed
	case "unsubscribed":
		m.Kind = kindUnsubscribed
	case "error":
		m.Kind = kindError
	}
	i := bytes.Index(b, keySeq)
	if i < 0 {
		return m, fmt.Errorf("%w: no seq in %.80q", errStreamLayout, b)
	}
	if m.Seq, ok = measure.ParseVersion(b[i+len(keySeq):]); !ok {
		return m, fmt.Errorf("%w: seq of %.80q", errStreamLayout, b)
	}
	if m.Kind != kindPrice {
		return m, nil
	}
	if m.Market, ok = stringAfter(b, measure.KeyMarketID); !ok {
		return m, fmt.Errorf("%w: no market_id in price %.80q", errStreamLayout, b)
	}
	i = bytes.Index(b, measure.KeyVersion)
	if i < 0 {
		return m, fmt.Errorf("%w: no version in price of %s", errStreamLayout, m.Market)
	}
	if m.Version, ok = measure.ParseVersion(b[i+len(measure.KeyVersion):]); !ok {
		return m, fmt.Errorf("%w: version of price of %s", errStreamLayout, m.Market)
	}
	return m, nil
}

// stringAfter is the JSON string that key (ending in its opening quote)
// introduces in b; ids and types hold no escapes.
func stringAfter(b, key []byte) ([]byte, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return nil, false
	}
	rest := b[i+len(key):]
	q := bytes.IndexByte(rest, '"')
	if q < 0 {
		return nil, false
	}
	return rest[:q], true
}

// wireMsg is a server message decoded in full: for checking the scan and for
// the few messages that are not prices.
type wireMsg struct {
	Type      string   `json:"type"`
	Seq       int64    `json:"seq"`
	MarketID  string   `json:"market_id"`
	Version   int64    `json:"version"`
	MarketIDs []string `json:"market_ids"`
	Missing   []string `json:"missing"`
	Code      string   `json:"code"`
	Message   string   `json:"message"`
}

// decodeStream decodes a server message in full.
func decodeStream(b []byte) (wireMsg, error) {
	var w wireMsg
	if err := json.Unmarshal(b, &w); err != nil {
		return w, fmt.Errorf("stream message is not JSON: %w: %.80q", err, b)
	}
	return w, nil
}

// checkStream decodes b in full and compares it with what scanStream read.
func checkStream(b []byte, got streamMsg) error {
	w, err := decodeStream(b)
	if err != nil {
		return err
	}
	if w.Type != got.Kind.String() && !(got.Kind == kindOther && w.Type != "") {
		return fmt.Errorf("%w: type %q scanned as %s", errStreamLayout, w.Type, got.Kind)
	}
	if w.Seq != got.Seq {
		return fmt.Errorf("%w: seq %d scanned as %d", errStreamLayout, w.Seq, got.Seq)
	}
	if got.Kind == kindPrice && (w.MarketID != string(got.Market) || w.Version != got.Version) {
		return fmt.Errorf("%w: price of %s version %d scanned as %s version %d",
			errStreamLayout, w.MarketID, w.Version, got.Market, got.Version)
	}
	return nil
}

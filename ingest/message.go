package ingest

import (
	stdjson "encoding/json"
	"errors"
	"reflect"
	"strings"

	"github.com/marketdata/marketdata/store"
)

// Message kinds, the third-from-last token of an ingest subject.
const (
	KindEvent  = "event"
	KindMarket = "market"
	KindPrice  = "price"
	KindTrade  = "trade"
)

// Update is one validated message: exactly one of its entity fields is set.
type Update struct {
	Kind   string
	Event  *store.Event
	Market *store.Market
	Price  *store.Price
	Trade  *store.Trade
}

// Key identifies the entity an update changes; trades are keyed by trade id.
func (u *Update) Key() string {
	switch u.Kind {
	case KindEvent:
		return u.Event.ID
	case KindMarket:
		return u.Market.ID
	case KindPrice:
		return u.Price.MarketID
	default:
		return u.Trade.TradeID
	}
}

// The message bodies of contract §4, which feed publishes too. Every field is
// a pointer, so that a missing field and a null are told from a zero value.
// Each kind's table (its fields method) has a row a field, in the order the
// fields are checked: must, may or when (whether the field is required), the
// field's name, its value, its check (checks.go) and where the checked value
// goes in the entity. decode (decode.go) runs the table.

// EventMsg is the body of md.v1.event.<id>.
type EventMsg struct {
	UniversalID       *string  `json:"universal_id"`
	Version           *int64   `json:"version"`
	Title             *string  `json:"title"`
	Category          *string  `json:"category"`
	Status            *string  `json:"status"`
	MergedInto        *string  `json:"merged_into"`
	VenueAEventTicker *string  `json:"venue_a_event_ticker"`
	VenueBEventSlug   *string  `json:"venue_b_event_slug"`
	VenueCEventID     *string  `json:"venue_c_event_id"`
	VenueDEventID     *string  `json:"venue_d_event_id"`
	Volume            *float64 `json:"volume"`
	UpdatedAt         *string  `json:"updated_at"`
	// Matches is the matcher's metadata per venue (absent or null: none).
	Matches MatchesMsg `json:"matches,omitempty"`
}

// MatchesMsg is the matches field of an event or market message: venue →
// entry. It is decoded entry by entry, so that the reason for a value of the
// wrong JSON type names its venue (matches.venue_a.confidence), which the
// decoder's own error leaves out for map values.
type MatchesMsg map[string]*MatchMsg

// UnmarshalJSON decodes the object; null leaves no entries.
func (m *MatchesMsg) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*m = nil
		return nil
	}
	var raw map[string]stdjson.RawMessage
	if err := stdjson.Unmarshal(data, &raw); err != nil {
		var te *stdjson.UnmarshalTypeError
		if errors.As(err, &te) {
			te.Type = reflect.TypeFor[MatchesMsg]()
		}
		return err
	}
	out := make(MatchesMsg, len(raw))
	for venue, r := range raw {
		var e *MatchMsg
		if err := stdjson.Unmarshal(r, &e); err != nil {
			// Only a venue's name goes into the reason: another key is
			// refused as an unknown venue and may hold any text.
			var te *stdjson.UnmarshalTypeError
			if errors.As(err, &te) && store.VenueIndex(venue) >= 0 {
				te.Field = strings.TrimSuffix(venue+"."+te.Field, ".")
			}
			return err
		}
		out[venue] = e
	}
	*m = out
	return nil
}

// MatchMsg is one venue's entry of an event's or market's matches; a null
// entry is no metadata for that venue, as no entry is.
type MatchMsg struct {
	Relation   *string  `json:"relation"`
	Confidence *float64 `json:"confidence"`
	Method     *string  `json:"method"`
}

func (m *EventMsg) fields(subject string, e *store.Event) []field {
	return []field{
		must("universal_id", m.UniversalID, subjectID(subject), &e.ID),
		must("version", m.Version, version, &e.Version),
		must("title", m.Title, title, &e.Title),
		must("category", m.Category, category, &e.Category),
		must("status", m.Status, eventStatus, &e.Status),
		when(m.Status, store.StatusMerged, "merged_into", m.MergedInto, idRef, &e.MergedInto),
		must("volume", m.Volume, volume, &e.Volume),
		must("updated_at", m.UpdatedAt, timestamp, &e.UpdatedAt),
		may(store.EventVenueFields[0], m.VenueAEventTicker, idRef, &e.VenueIDs[0]),
		may(store.EventVenueFields[1], m.VenueBEventSlug, idRef, &e.VenueIDs[1]),
		may(store.EventVenueFields[2], m.VenueCEventID, idRef, &e.VenueIDs[2]),
		may(store.EventVenueFields[3], m.VenueDEventID, idRef, &e.VenueIDs[3]),
		mayMap("matches", &m.Matches, matches(m.idFields()), &e.Matches),
	}
}

// idFields names, for each venue, the field that holds the event's id there,
// or "" when the message has none.
func (m *EventMsg) idFields() [4]string {
	var out [4]string
	for i, v := range []*string{m.VenueAEventTicker, m.VenueBEventSlug, m.VenueCEventID, m.VenueDEventID} {
		if v != nil {
			out[i] = store.EventVenueFields[i]
		}
	}
	return out
}

// MarketMsg is the body of md.v1.market.<id>.
type MarketMsg struct {
	UniversalID *string           `json:"universal_id"`
	EventID     *string           `json:"event_id"`
	Version     *int64            `json:"version"`
	Title       *string           `json:"title"`
	Status      *string           `json:"status"`
	Venues      map[string]string `json:"venues"`
	ResolvedAt  *string           `json:"resolved_at"`
	Result      *string           `json:"result"`
	UpdatedAt   *string           `json:"updated_at"`
	// Matches is the matcher's metadata per venue (absent or null: none).
	Matches MatchesMsg `json:"matches,omitempty"`
}

func (m *MarketMsg) fields(subject string, mk *store.Market) []field {
	return []field{
		must("universal_id", m.UniversalID, subjectID(subject), &mk.ID),
		must("event_id", m.EventID, id, &mk.EventID),
		must("version", m.Version, version, &mk.Version),
		must("title", m.Title, title, &mk.Title),
		may("result", m.Result, result, nil), // checked whatever the status, kept when resolved
		must("status", m.Status, marketStatus, &mk.Status),
		mustMap("venues", &m.Venues, venueIDs, &mk.Venues),
		must("updated_at", m.UpdatedAt, timestamp, &mk.UpdatedAt),
		when(m.Status, store.StatusResolved, "resolved_at", m.ResolvedAt, timestampRef, &mk.ResolvedAt),
		when(m.Status, store.StatusResolved, "result", m.Result, keep, &mk.Result),
		mayMap("matches", &m.Matches, matches(m.idFields()), &mk.Matches),
	}
}

// idFields names, for each venue, the field that holds the market's id
// there, or "" when the message has none.
func (m *MarketMsg) idFields() [4]string {
	var out [4]string
	for i, v := range store.Venues {
		if _, ok := m.Venues[v]; ok {
			out[i] = "venues." + v
		}
	}
	return out
}

// QuoteMsg is one venue's quote in a price message.
type QuoteMsg struct {
	Bid       *float64 `json:"bid"`
	Ask       *float64 `json:"ask"`
	Last      *float64 `json:"last"`
	Volume24h *float64 `json:"volume_24h"`
}

// PriceMsg is the body of md.v1.price.<market_id>.
type PriceMsg struct {
	MarketID *string             `json:"market_id"`
	Version  *int64              `json:"version"`
	TS       *string             `json:"ts"`
	Quotes   map[string]QuoteMsg `json:"quotes"`
}

func (m *PriceMsg) fields(subject string, p *store.Price) []field {
	return []field{
		must("market_id", m.MarketID, subjectID(subject), &p.MarketID),
		must("version", m.Version, version, &p.Version),
		must("ts", m.TS, timestamp, &p.TS),
		mustMap("quotes", &m.Quotes, quotes, &p.Quotes),
	}
}

// TradeMsg is the body of md.v1.trade.<market_id>.
type TradeMsg struct {
	MarketID *string  `json:"market_id"`
	TradeID  *string  `json:"trade_id"`
	Venue    *string  `json:"venue"`
	Price    *float64 `json:"price"`
	Size     *float64 `json:"size"`
	Side     *string  `json:"side"`
	TS       *string  `json:"ts"`
}

func (m *TradeMsg) fields(subject string, t *store.Trade) []field {
	return []field{
		must("market_id", m.MarketID, subjectID(subject), &t.MarketID),
		must("trade_id", m.TradeID, id, &t.TradeID),
		must("venue", m.Venue, venue, &t.Venue),
		must("price", m.Price, unit, &t.Price),
		must("size", m.Size, size, &t.Size),
		must("side", m.Side, side, &t.Side),
		must("ts", m.TS, timestamp, &t.TS),
	}
}

// ParseSubject splits "<prefix>.<kind>.<id>" into kind and id. The kind is
// returned even when the id is bad, so the reject can be filed under it.
func ParseSubject(prefix, subject string) (kind, id string, err error) {
	rest, ok := strings.CutPrefix(subject, prefix+".")
	if !ok {
		return "unknown", "", invalid(ReasonSubject, "subject %q is not under %q", subject, prefix)
	}
	kind, id, ok = strings.Cut(rest, ".")
	switch kind {
	case KindEvent, KindMarket, KindPrice, KindTrade:
	default:
		return "unknown", "", invalid(ReasonSubject, "unknown message kind %q", kind)
	}
	if !ok || !store.ValidID(id) {
		return kind, "", invalid(ReasonSubject, "subject id %q does not match %s", id, store.IDPattern)
	}
	return kind, id, nil
}

// Decode validates one message per contract §4. Every failure is an
// *InvalidError; a nil error means the update may be applied.
func Decode(prefix, subject string, data []byte) (*Update, error) {
	kind, id, err := ParseSubject(prefix, subject)
	if err != nil {
		return &Update{Kind: kind}, err
	}
	u := &Update{Kind: kind}
	switch kind {
	case KindEvent:
		u.Event, err = decode(data, id, (*EventMsg).fields)
	case KindMarket:
		u.Market, err = decode(data, id, (*MarketMsg).fields)
	case KindPrice:
		u.Price, err = decode(data, id, (*PriceMsg).fields)
	case KindTrade:
		u.Trade, err = decode(data, id, (*TradeMsg).fields)
	}
	return u, err
}

package ingest

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	json "github.com/segmentio/encoding/json"

	"github.com/marketdata/marketdata/store"
)

// Message kinds, the third-from-last token of an ingest subject.
const (
	KindEvent  = "event"
	KindMarket = "market"
	KindPrice  = "price"
	KindTrade  = "trade"
)

// Reject reasons. A reason is one of these codes, then ": " and a detail.
const (
	ReasonBadJSON         = "bad_json"
	ReasonMissingField    = "missing_field"
	ReasonInvalidField    = "invalid_field"
	ReasonInvalidVersion  = "invalid_version"
	ReasonInvalidID       = "invalid_id"
	ReasonInvalidCategory = "invalid_category"
	ReasonInvalidStatus   = "invalid_status"
	ReasonInvalidSide     = "invalid_side"
	ReasonInvalidVenue    = "invalid_venue"
	ReasonPriceRange      = "price_out_of_range"
	ReasonInvalidSize     = "invalid_size"
	ReasonInvalidVolume   = "invalid_volume"
	ReasonInvalidTime     = "invalid_time"
	ReasonTextTooLong     = "text_too_long"
	ReasonSubject         = "invalid_subject"
	ReasonMaxDeliveries   = "max_deliveries"
)

// Text limits of contract §4, in characters: Unicode code points (runes), not
// bytes, so a title of 300 characters in any script is accepted (up to 1,200
// bytes of UTF-8) and answers stay small.
const (
	MaxTitleChars  = 300
	MaxResultChars = 64
)

// rfc3339Pattern is the shape of an RFC 3339 date-time. time.Parse alone also
// accepts a one-digit hour, a comma before the fraction and the offsets
// +24:00 or +23:60 (go.dev/issue/54580), none of which is RFC 3339.
var rfc3339Pattern = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`)

// InvalidError says why a message cannot be applied. Reason is stored and
// published with the reject.
type InvalidError struct {
	Code   string
	Detail string
}

func (e *InvalidError) Error() string {
	if e.Detail == "" {
		return e.Code
	}
	return e.Code + ": " + e.Detail
}

func invalid(code, format string, args ...any) error {
	return &InvalidError{Code: code, Detail: fmt.Sprintf(format, args...)}
}

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
		u.Event, err = decodeEvent(id, data)
	case KindMarket:
		u.Market, err = decodeMarket(id, data)
	case KindPrice:
		u.Price, err = decodePrice(id, data)
	case KindTrade:
		u.Trade, err = decodeTrade(id, data)
	}
	return u, err
}

func unmarshal(data []byte, v any) error {
	// Decoding null into a struct succeeds and sets nothing; it is no more an
	// object than an array or a string is.
	if bytes.Equal(bytes.Trim(data, " \t\r\n"), []byte("null")) {
		return invalid(ReasonBadJSON, "the body is a JSON null, not an object")
	}
	// json.Unmarshal checks the whole input first, so trailing data after
	// the object is a syntax error like any other. A message refused by the
	// fast decoder is decoded again by encoding/json, whose errors name the
	// JSON type and escape the bytes they quote: reasons stay what they
	// were, and never carry a NUL or invalid UTF-8 (which Postgres refuses
	// in ingest_rejects).
	if err := json.Unmarshal(data, v); err != nil {
		err = stdjson.Unmarshal(data, v)
		if err == nil {
			return invalid(ReasonBadJSON, "the body is not valid JSON")
		}
		var te *stdjson.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return invalid(ReasonBadJSON, "the body is a JSON %s, not an object", te.Value)
			}
			return invalid(ReasonInvalidField, "field %s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return invalid(ReasonBadJSON, "%v", err)
	}
	return nil
}

func checkID(name string, v string) error {
	if !store.ValidID(v) {
		return invalid(ReasonInvalidID, "%s %q does not match %s", name, truncate(v), store.IDPattern)
	}
	return nil
}

func checkVersion(v int64) error {
	if v < 1 {
		return invalid(ReasonInvalidVersion, "version %d is below 1", v)
	}
	return nil
}

func checkSubjectID(name, body, subject string) error {
	if body != subject {
		return invalid(ReasonSubject, "%s %q differs from the subject's id %q", name, truncate(body), subject)
	}
	return nil
}

func parseTime(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !rfc3339Pattern.MatchString(v) {
		return time.Time{}, invalid(ReasonInvalidTime, "%s %q is not RFC 3339", name, truncate(v))
	}
	// Times are served as RFC 3339 in UTC, whose year has four digits: one whose
	// UTC year leaves 0001–9999 could be stored but not served as RFC 3339 (and
	// time.Time.MarshalJSON refuses it); the zero time reads as "unset" in Go.
	t = t.UTC()
	if t.IsZero() || t.Year() < 1 || t.Year() > 9999 {
		return time.Time{}, invalid(ReasonInvalidTime, "%s %q is outside 0001-01-01 to 9999-12-31 in UTC", name, truncate(v))
	}
	// Postgres keeps microseconds: truncate here so that what is stored, what
	// ingest caches and what a rebuild renders are the same instant.
	return t.Truncate(time.Microsecond), nil
}

// checkText refuses a NUL character, which Postgres text cannot hold: such a
// message could never be stored and would otherwise be retried forever.
func checkText(name string, v *string) error {
	if v != nil && strings.IndexByte(*v, 0) >= 0 {
		return invalid(ReasonInvalidField, "%s contains a NUL character", name)
	}
	return nil
}

// checkLen refuses a text of more than max characters (runes, not bytes).
// JSON decoding has already turned invalid UTF-8 into U+FFFD, one rune each.
func checkLen(name string, v *string, limit int) error {
	if v == nil || len(*v) <= limit { // at most len bytes hold at most len runes
		return nil
	}
	if n := utf8.RuneCountInString(*v); n > limit {
		return invalid(ReasonTextTooLong, "%s has %d characters, over the limit of %d (characters are Unicode code points, not bytes)", name, n, limit)
	}
	return nil
}

func checkUnit(name string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return invalid(ReasonPriceRange, "%s %v is outside [0,1]", name, v)
	}
	return nil
}

func checkVenue(v string) error {
	if store.VenueIndex(v) < 0 {
		return invalid(ReasonInvalidVenue, "unknown venue %q (want venue_a, venue_b, venue_c or venue_d)", truncate(v))
	}
	return nil
}

// truncate shortens a value quoted in a reason to about 80 bytes, cutting
// at a character boundary so the reason stays valid UTF-8.
func truncate(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 80
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func decodeEvent(subjectID string, data []byte) (*store.Event, error) {
	var m EventMsg
	if err := unmarshal(data, &m); err != nil {
		return nil, err
	}
	for _, r := range []struct {
		name string
		ok   bool
	}{
		{"universal_id", m.UniversalID != nil}, {"version", m.Version != nil},
		{"title", m.Title != nil}, {"category", m.Category != nil},
		{"status", m.Status != nil}, {"volume", m.Volume != nil},
		{"updated_at", m.UpdatedAt != nil},
	} {
		if !r.ok {
			return nil, invalid(ReasonMissingField, "%s", r.name)
		}
	}
	if err := checkID("universal_id", *m.UniversalID); err != nil {
		return nil, err
	}
	if err := checkSubjectID("universal_id", *m.UniversalID, subjectID); err != nil {
		return nil, err
	}
	if err := checkVersion(*m.Version); err != nil {
		return nil, err
	}
	if err := checkText("title", m.Title); err != nil {
		return nil, err
	}
	if err := checkLen("title", m.Title, MaxTitleChars); err != nil {
		return nil, err
	}
	if !store.ValidCategory(*m.Category) {
		return nil, invalid(ReasonInvalidCategory, "category %q does not match %s", truncate(*m.Category), store.CategoryPattern)
	}
	switch *m.Status {
	case store.StatusActive, store.StatusResolved:
		m.MergedInto = nil
	case store.StatusMerged:
		if m.MergedInto == nil {
			return nil, invalid(ReasonMissingField, "merged_into (required when status is merged)")
		}
		if err := checkID("merged_into", *m.MergedInto); err != nil {
			return nil, err
		}
	default:
		return nil, invalid(ReasonInvalidStatus, "status %q is not active, resolved or merged", truncate(*m.Status))
	}
	if math.IsNaN(*m.Volume) || *m.Volume < 0 {
		return nil, invalid(ReasonInvalidVolume, "volume %v is negative", *m.Volume)
	}
	updated, err := parseTime("updated_at", *m.UpdatedAt)
	if err != nil {
		return nil, err
	}
	e := &store.Event{
		ID: *m.UniversalID, Version: *m.Version, Title: *m.Title, Category: *m.Category,
		Status: *m.Status, MergedInto: m.MergedInto, Volume: plusZero(*m.Volume), UpdatedAt: updated,
		VenueIDs: [4]*string{m.VenueAEventTicker, m.VenueBEventSlug, m.VenueCEventID, m.VenueDEventID},
	}
	for i, v := range e.VenueIDs {
		if v != nil {
			if err := checkID(store.EventVenueFields[i], *v); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

func decodeMarket(subjectID string, data []byte) (*store.Market, error) {
	var m MarketMsg
	if err := unmarshal(data, &m); err != nil {
		return nil, err
	}
	for _, r := range []struct {
		name string
		ok   bool
	}{
		{"universal_id", m.UniversalID != nil}, {"event_id", m.EventID != nil},
		{"version", m.Version != nil}, {"title", m.Title != nil},
		{"status", m.Status != nil}, {"venues", m.Venues != nil},
		{"updated_at", m.UpdatedAt != nil},
	} {
		if !r.ok {
			return nil, invalid(ReasonMissingField, "%s", r.name)
		}
	}
	if err := checkID("universal_id", *m.UniversalID); err != nil {
		return nil, err
	}
	if err := checkSubjectID("universal_id", *m.UniversalID, subjectID); err != nil {
		return nil, err
	}
	if err := checkID("event_id", *m.EventID); err != nil {
		return nil, err
	}
	if err := checkVersion(*m.Version); err != nil {
		return nil, err
	}
	if err := checkText("title", m.Title); err != nil {
		return nil, err
	}
	if err := checkText("result", m.Result); err != nil {
		return nil, err
	}
	if err := checkLen("title", m.Title, MaxTitleChars); err != nil {
		return nil, err
	}
	if err := checkLen("result", m.Result, MaxResultChars); err != nil {
		return nil, err
	}
	for venue, id := range m.Venues {
		if err := checkVenue(venue); err != nil {
			return nil, err
		}
		if err := checkID("venues."+venue, id); err != nil {
			return nil, err
		}
	}
	updated, err := parseTime("updated_at", *m.UpdatedAt)
	if err != nil {
		return nil, err
	}
	mk := &store.Market{
		ID: *m.UniversalID, EventID: *m.EventID, Version: *m.Version, Title: *m.Title,
		Status: *m.Status, Venues: m.Venues, UpdatedAt: updated,
	}
	switch *m.Status {
	case store.StatusActive:
	case store.StatusResolved:
		if m.ResolvedAt == nil {
			return nil, invalid(ReasonMissingField, "resolved_at (required when status is resolved)")
		}
		if m.Result == nil {
			return nil, invalid(ReasonMissingField, "result (required when status is resolved)")
		}
		at, err := parseTime("resolved_at", *m.ResolvedAt)
		if err != nil {
			return nil, err
		}
		mk.ResolvedAt, mk.Result = &at, m.Result
	default:
		return nil, invalid(ReasonInvalidStatus, "status %q is not active or resolved", truncate(*m.Status))
	}
	return mk, nil
}

func decodePrice(subjectID string, data []byte) (*store.Price, error) {
	var m PriceMsg
	if err := unmarshal(data, &m); err != nil {
		return nil, err
	}
	for _, r := range []struct {
		name string
		ok   bool
	}{
		{"market_id", m.MarketID != nil}, {"version", m.Version != nil},
		{"ts", m.TS != nil}, {"quotes", m.Quotes != nil},
	} {
		if !r.ok {
			return nil, invalid(ReasonMissingField, "%s", r.name)
		}
	}
	if err := checkID("market_id", *m.MarketID); err != nil {
		return nil, err
	}
	if err := checkSubjectID("market_id", *m.MarketID, subjectID); err != nil {
		return nil, err
	}
	if err := checkVersion(*m.Version); err != nil {
		return nil, err
	}
	ts, err := parseTime("ts", *m.TS)
	if err != nil {
		return nil, err
	}
	p := &store.Price{MarketID: *m.MarketID, Version: *m.Version, TS: ts, Quotes: make(map[string]store.Quote, len(m.Quotes))}
	for venue, q := range m.Quotes {
		if err := checkVenue(venue); err != nil {
			return nil, err
		}
		for _, f := range []struct {
			name string
			v    *float64
		}{{"bid", q.Bid}, {"ask", q.Ask}, {"last", q.Last}} {
			if f.v != nil {
				if err := checkUnit("quotes."+venue+"."+f.name, *f.v); err != nil {
					return nil, err
				}
			}
		}
		if q.Volume24h == nil {
			return nil, invalid(ReasonMissingField, "quotes.%s.volume_24h", venue)
		}
		if math.IsNaN(*q.Volume24h) || *q.Volume24h < 0 {
			return nil, invalid(ReasonInvalidVolume, "quotes.%s.volume_24h %v is negative", venue, *q.Volume24h)
		}
		p.Quotes[venue] = store.Quote{Bid: plusZeroPtr(q.Bid), Ask: plusZeroPtr(q.Ask), Last: plusZeroPtr(q.Last), Volume24h: plusZero(*q.Volume24h)}
	}
	return p, nil
}

func decodeTrade(subjectID string, data []byte) (*store.Trade, error) {
	var m TradeMsg
	if err := unmarshal(data, &m); err != nil {
		return nil, err
	}
	for _, r := range []struct {
		name string
		ok   bool
	}{
		{"market_id", m.MarketID != nil}, {"trade_id", m.TradeID != nil},
		{"venue", m.Venue != nil}, {"price", m.Price != nil},
		{"size", m.Size != nil}, {"side", m.Side != nil}, {"ts", m.TS != nil},
	} {
		if !r.ok {
			return nil, invalid(ReasonMissingField, "%s", r.name)
		}
	}
	if err := checkID("market_id", *m.MarketID); err != nil {
		return nil, err
	}
	if err := checkSubjectID("market_id", *m.MarketID, subjectID); err != nil {
		return nil, err
	}
	if err := checkID("trade_id", *m.TradeID); err != nil {
		return nil, err
	}
	if err := checkVenue(*m.Venue); err != nil {
		return nil, err
	}
	if err := checkUnit("price", *m.Price); err != nil {
		return nil, err
	}
	if math.IsNaN(*m.Size) || *m.Size <= 0 {
		return nil, invalid(ReasonInvalidSize, "size %v is not above 0", *m.Size)
	}
	if *m.Side != "buy" && *m.Side != "sell" {
		return nil, invalid(ReasonInvalidSide, "side %q is not buy or sell", truncate(*m.Side))
	}
	ts, err := parseTime("ts", *m.TS)
	if err != nil {
		return nil, err
	}
	return &store.Trade{
		MarketID: *m.MarketID, TradeID: *m.TradeID, Venue: *m.Venue,
		Price: plusZero(*m.Price), Size: *m.Size, Side: *m.Side, TS: ts,
	}, nil
}

// plusZero turns -0 into 0: Postgres keeps no negative zero, so what ingest
// caches and what a rebuild renders would differ, and "-0" is no price.
func plusZero(f float64) float64 {
	if f == 0 {
		return 0
	}
	return f
}

func plusZeroPtr(f *float64) *float64 {
	if f == nil || *f != 0 {
		return f
	}
	z := 0.0
	return &z
}

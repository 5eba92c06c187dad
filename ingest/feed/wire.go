package feed

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// timeLayout is RFC 3339 with a fixed six-digit fraction. time.RFC3339Nano
// drops the fraction when it is zero, and the contract asks for fractional
// seconds; microseconds are what Postgres keeps.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

func stamp(t time.Time) string { return t.UTC().Format(timeLayout) }

func venueName(v int) string { return store.Venues[v] }

// The JSON bodies of contract §4. Absent optional values are sent as null.

type eventWire struct {
	UniversalID string  `json:"universal_id"`
	Version     int64   `json:"version"`
	Title       string  `json:"title"`
	Category    string  `json:"category"`
	Status      string  `json:"status"`
	MergedInto  *string `json:"merged_into"`
	VenueA      *string `json:"venue_a_event_ticker"`
	VenueB      *string `json:"venue_b_event_slug"`
	VenueC      *string `json:"venue_c_event_id"`
	VenueD      *string `json:"venue_d_event_id"`
	Volume      float64 `json:"volume"`
	UpdatedAt   string  `json:"updated_at"`
}

type marketWire struct {
	UniversalID string            `json:"universal_id"`
	EventID     string            `json:"event_id"`
	Version     int64             `json:"version"`
	Title       string            `json:"title"`
	Status      string            `json:"status"`
	Venues      map[string]string `json:"venues"`
	ResolvedAt  *string           `json:"resolved_at"`
	Result      *string           `json:"result"`
	UpdatedAt   string            `json:"updated_at"`
}

// quoteWire is one venue's quote; a settled market's book has no bid and no
// ask (null), and its last price is the settlement.
type quoteWire struct {
	Bid       *float64 `json:"bid"`
	Ask       *float64 `json:"ask"`
	Last      float64  `json:"last"`
	Volume24h float64  `json:"volume_24h"`
}

type priceWire struct {
	MarketID string               `json:"market_id"`
	Version  int64                `json:"version"`
	TS       string               `json:"ts"`
	Quotes   map[string]quoteWire `json:"quotes"`
}

type tradeWire struct {
	MarketID string  `json:"market_id"`
	TradeID  string  `json:"trade_id"`
	Venue    string  `json:"venue"`
	Price    float64 `json:"price"`
	Size     float64 `json:"size"`
	Side     string  `json:"side"`
	TS       string  `json:"ts"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// eventMsg encodes e at its current version and keeps the message as e's
// latest, which Initial replays. Likewise marketMsg and priceMsg.
func (g *Generator) eventMsg(e *event) Msg {
	w := eventWire{
		UniversalID: e.id, Version: e.version, Title: e.title, Category: e.category,
		Status: e.status, MergedInto: optional(e.mergedInto),
		VenueA: optional(e.venues[venueA]), VenueB: optional(e.venues[venueB]),
		VenueC: optional(e.venues[venueC]), VenueD: optional(e.venues[venueD]),
		Volume: e.volume, UpdatedAt: stamp(e.updatedAt),
	}
	e.lastMsg = g.msg(ingest.KindEvent, e.id, e.version, w)
	return e.lastMsg
}

func (g *Generator) marketMsg(m *market) Msg {
	w := marketWire{
		UniversalID: m.id, EventID: m.ev.id, Version: m.version, Title: m.title,
		Status: m.status, Venues: make(map[string]string, 4), UpdatedAt: stamp(m.updatedAt),
	}
	for v, id := range m.venues {
		if id != "" {
			w.Venues[venueName(v)] = id
		}
	}
	if m.status == store.StatusResolved {
		at := stamp(m.resolvedAt)
		w.ResolvedAt, w.Result = &at, &m.result
	}
	m.lastMsg = g.msg(ingest.KindMarket, m.id, m.version, w)
	return m.lastMsg
}

func (g *Generator) priceMsg(m *market) Msg {
	w := priceWire{MarketID: m.id, Version: m.priceVersion, TS: stamp(m.priceTS), Quotes: make(map[string]quoteWire, 4)}
	for v, q := range m.quotes {
		if q != nil {
			w.Quotes[venueName(v)] = quoteWire{
				Bid: q.side(q.bid), Ask: q.side(q.ask), Last: q.price(q.last), Volume24h: cents(q.vol),
			}
		}
	}
	m.lastPrice = g.msg(ingest.KindPrice, m.id, m.priceVersion, w)
	return m.lastPrice
}

func (g *Generator) tradeMsg(t tradeWire) Msg {
	data := mustJSON(t)
	return Msg{
		Subject: g.cfg.SubjectPrefix + "." + ingest.KindTrade + "." + t.MarketID,
		Data:    data,
		MsgID:   ingest.KindTrade + "." + t.TradeID,
	}
}

// msg wraps the body of a versioned entity; its MsgID names the entity and
// version, so the same state published twice is deduplicated.
func (g *Generator) msg(kind, id string, version int64, body any) Msg {
	return Msg{
		Subject: g.cfg.SubjectPrefix + "." + kind + "." + id,
		Data:    mustJSON(body),
		MsgID:   kind + "." + id + "." + strconv.FormatInt(version, 10),
	}
}

// mustJSON encodes a wire body. The bodies hold only strings, finite numbers
// and maps with string keys, so an error is a bug in this package.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("feed: encode %T: %v", v, err))
	}
	return b
}

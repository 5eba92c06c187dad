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

// The bodies are ingest's message types, so what feed publishes and what
// ingest decodes cannot drift apart. Absent optional values are sent as null.

// ref points at a copy of v: every field of a message body is a pointer.
func ref[T any](v T) *T { return &v }

// optional is an optional id or text: nil (sent as null) when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// eventMsg encodes e at its current version and keeps the message as e's
// latest, which Initial replays. Likewise marketMsg and priceMsg.
func (g *Generator) eventMsg(e *event) Msg {
	w := ingest.EventMsg{
		UniversalID: ref(e.id), Version: ref(e.version), Title: ref(e.title), Category: ref(e.category),
		Status: ref(e.status), MergedInto: optional(e.mergedInto),
		VenueAEventTicker: optional(e.venues[venueA]), VenueBEventSlug: optional(e.venues[venueB]),
		VenueCEventID: optional(e.venues[venueC]), VenueDEventID: optional(e.venues[venueD]),
		Volume: ref(e.volume), UpdatedAt: ref(stamp(e.updatedAt)), Matches: matchesMsg(&e.links),
	}
	e.lastMsg = g.msg(ingest.KindEvent, e.id, e.version, w)
	return e.lastMsg
}

func (g *Generator) marketMsg(m *market) Msg {
	w := ingest.MarketMsg{
		UniversalID: ref(m.id), EventID: ref(m.ev.id), Version: ref(m.version), Title: ref(m.title),
		Status: ref(m.status), Venues: make(map[string]string, 4), UpdatedAt: ref(stamp(m.updatedAt)),
		Matches: matchesMsg(&m.links),
	}
	for v, id := range m.venues {
		if id != "" {
			w.Venues[venueName(v)] = id
		}
	}
	if m.status == store.StatusResolved {
		w.ResolvedAt, w.Result = ref(stamp(m.resolvedAt)), ref(m.result)
	}
	m.lastMsg = g.msg(ingest.KindMarket, m.id, m.version, w)
	return m.lastMsg
}

func (g *Generator) priceMsg(m *market) Msg {
	w := ingest.PriceMsg{
		MarketID: ref(m.id), Version: ref(m.priceVersion), TS: ref(stamp(m.priceTS)),
		Quotes: make(map[string]ingest.QuoteMsg, 4),
	}
	// A settled market's book has no bid and no ask (null), and its last
	// price is the settlement.
	for v, q := range m.quotes {
		if q != nil {
			w.Quotes[venueName(v)] = ingest.QuoteMsg{
				Bid: q.side(q.bid), Ask: q.side(q.ask), Last: ref(q.price(q.last)), Volume24h: ref(cents(q.vol)),
			}
		}
	}
	m.lastPrice = g.msg(ingest.KindPrice, m.id, m.priceVersion, w)
	return m.lastPrice
}

func (g *Generator) tradeMsg(t ingest.TradeMsg) Msg {
	data := mustJSON(t)
	return Msg{
		Subject: g.cfg.SubjectPrefix + "." + ingest.KindTrade + "." + *t.MarketID,
		Data:    data,
		MsgID:   ingest.KindTrade + "." + *t.TradeID,
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

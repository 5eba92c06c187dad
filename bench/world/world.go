package world

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// wireTime is RFC 3339 with a fixed six-digit fraction, as contract §4 asks.
const wireTime = "2006-01-02T15:04:05.000000Z07:00"

// World is the benchmark's synthetic matcher state: Events events, each on
// two venues (so served), with PerEvent active markets each. Market i belongs
// to event i / PerEvent. Its messages follow contract §4.
type World struct {
	Events, PerEvent int
	// SubjectPrefix is the sandbox's "<id>.md.v1".
	SubjectPrefix string
	// Start stamps updated_at and ts.
	Start time.Time
}

// Markets is the number of markets.
func (w *World) Markets() int { return w.Events * w.PerEvent }

// EventID names event e.
func (w *World) EventID(e int) string { return fmt.Sprintf("bev-%05d", e) }

// MarketID names market i.
func (w *World) MarketID(i int) string {
	return fmt.Sprintf("bmk-%05d-%d", i/w.PerEvent, i%w.PerEvent)
}

// MarketIDs lists every market id, by index.
func (w *World) MarketIDs() []string {
	ids := make([]string, w.Markets())
	for i := range ids {
		ids[i] = w.MarketID(i)
	}
	return ids
}

// Outgoing is one message ready to publish.
type Outgoing struct {
	Subject string
	Data    []byte
	MsgID   string
}

// Msg builds the NATS message, with Nats-Msg-Id. A message must not be
// published twice at once, so each publish gets a fresh one.
func (o *Outgoing) Msg() *nats.Msg {
	return &nats.Msg{Subject: o.Subject, Data: o.Data, Header: nats.Header{jetstream.MsgIDHeader: []string{o.MsgID}}}
}

func (w *World) outgoing(kind, id string, version int64, body any) Outgoing {
	data, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("mdbench: encode %s %s: %v", kind, id, err)) // plain strings and numbers only
	}
	return Outgoing{
		Subject: w.SubjectPrefix + "." + kind + "." + id,
		Data:    data,
		MsgID:   "bench." + kind + "." + id + "." + strconv.FormatInt(version, 10),
	}
}

// Seed is every event, then every market, at version 1.
func (w *World) Seed() []Outgoing {
	at := w.Start.UTC().Format(wireTime)
	out := make([]Outgoing, 0, w.Events+w.Markets())
	for e := range w.Events {
		id := w.EventID(e)
		ticker, slug := fmt.Sprintf("BENCH-%05d", e), fmt.Sprintf("bench-event-%05d", e)
		out = append(out, w.outgoing(ingest.KindEvent, id, 1, map[string]any{
			"universal_id": id, "version": 1, "title": fmt.Sprintf("Benchmark event %d", e),
			"category": "bench", "status": store.StatusActive, "merged_into": nil,
			"venue_a_event_ticker": ticker, "venue_b_event_slug": slug,
			"venue_c_event_id": nil, "venue_d_event_id": nil,
			"volume": float64(1000 + e), "updated_at": at,
		}))
	}
	for i := range w.Markets() {
		id, e, j := w.MarketID(i), i/w.PerEvent, i%w.PerEvent
		out = append(out, w.outgoing(ingest.KindMarket, id, 1, map[string]any{
			"universal_id": id, "event_id": w.EventID(e), "version": 1,
			"title": fmt.Sprintf("Benchmark market %d of event %d", j, e), "status": store.StatusActive,
			"venues": map[string]string{
				"venue_a": fmt.Sprintf("BENCH-%05d-M%d", e, j),
				"venue_b": fmt.Sprintf("bench-event-%05d-m%d", e, j),
			},
			"resolved_at": nil, "result": nil, "updated_at": at,
		}))
	}
	return out
}

// Price is market i's price at version v: quotes on two to four venues,
// varying with i and v, all within [0,1].
func (w *World) Price(i int, v int64) store.Price {
	venues := 2 + (i+int(v))%3
	quotes := make(map[string]store.Quote, venues)
	for k := range venues {
		mid := 0.5 + 0.4*math.Sin(float64(i)*0.7+float64(v)*0.13+float64(k))
		bid, ask, last := cents(mid-0.01), cents(mid+0.01), cents(mid)
		quotes[store.Venues[k]] = store.Quote{Bid: &bid, Ask: &ask, Last: &last, Volume24h: float64(100*(i%97) + int(v))}
	}
	ts := w.Start.Add(time.Duration(v) * time.Millisecond).UTC().Truncate(time.Microsecond)
	return store.Price{MarketID: w.MarketID(i), Version: v, TS: ts, Quotes: quotes}
}

func cents(v float64) float64 { return math.Round(v*100) / 100 }

// priceWire is the body of md.v1.price.<market_id>; store.Quote's JSON names
// are the contract's quote fields.
type priceWire struct {
	MarketID string                 `json:"market_id"`
	Version  int64                  `json:"version"`
	TS       string                 `json:"ts"`
	Quotes   map[string]store.Quote `json:"quotes"`
}

// PriceMsg is the message that carries p.
func (w *World) PriceMsg(p store.Price) Outgoing {
	return w.outgoing(ingest.KindPrice, p.MarketID, p.Version, priceWire{
		MarketID: p.MarketID, Version: p.Version, TS: p.TS.Format(wireTime), Quotes: p.Quotes,
	})
}

// Round is how a run of price updates is laid out: update n goes to market
// n mod Markets at version Base + n / Markets, so versions increase per
// market and the last round carries each market's final version.
type Round struct {
	Markets int
	Base    int64
	N       int
}

// At is update n's market index and version.
func (r Round) At(n int) (market int, version int64) {
	return n % r.Markets, r.Base + int64(n/r.Markets)
}

// Final is the version market i holds once the run is applied (N is at
// least Markets, so every market gets one).
func (r Round) Final(i int) int64 { return r.Base + int64((r.N-1-i)/r.Markets) }

// Prices builds the run's rows, in publish order.
func (w *World) Prices(r Round) []store.Price {
	rows := make([]store.Price, r.N)
	for n := range rows {
		i, v := r.At(n)
		rows[n] = w.Price(i, v)
	}
	return rows
}

// PriceMsgs encodes rows as messages.
func (w *World) PriceMsgs(rows []store.Price) []Outgoing {
	out := make([]Outgoing, len(rows))
	for n, p := range rows {
		out[n] = w.PriceMsg(p)
	}
	return out
}

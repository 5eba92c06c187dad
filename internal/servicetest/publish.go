package servicetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Matcher messages (contract §4), as a test writes them. Zero values are
// filled in by the Put methods: Version with the entity's next version (one
// above the last one this Service published), times with now, Status with
// "active".

// Venues are the four venue names, in the order of Event.Venues.
var Venues = [4]string{"venue_a", "venue_b", "venue_c", "venue_d"}

// Event is the body of md.v1.event.<id>.
type Event struct {
	ID, Title, Category, Status, MergedInto string
	// Venues are the venue ids on venue_a … venue_d; "" is null. Two or
	// more make the event served.
	Venues    [4]string
	Volume    float64
	Version   int64
	UpdatedAt time.Time
	// Matches is the matcher's metadata by venue name (nil: none sent).
	Matches map[string]Match
}

// Match is one venue's entry of an event's or market's matches.
type Match struct {
	Relation   string  `json:"relation"`
	Confidence float64 `json:"confidence"`
	Method     string  `json:"method"`
}

// Market is the body of md.v1.market.<id>.
type Market struct {
	ID, EventID, Title, Status string
	// Venues maps a venue name to the venue's own market id.
	Venues     map[string]string
	ResolvedAt time.Time // with Status "resolved"
	Result     string    // with Status "resolved"
	Version    int64
	UpdatedAt  time.Time
	// Matches is the matcher's metadata by venue name (nil: none sent).
	Matches map[string]Match
}

// Quote is one venue's quote of a Price.
type Quote struct {
	Bid, Ask, Last, Volume24h float64
}

// Price is the body of md.v1.price.<market_id>: a full replacement.
type Price struct {
	MarketID string
	Quotes   map[string]Quote
	Version  int64
	TS       time.Time
}

// Trade is the body of md.v1.trade.<market_id>.
type Trade struct {
	MarketID, TradeID, Venue string
	Price, Size              float64
	Side                     string
	TS                       time.Time
}

// timeLayout is RFC 3339 with a fixed six-digit fraction (the contract asks
// for fractional seconds; Postgres keeps microseconds).
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

func stamp(t time.Time) string { return t.UTC().Format(timeLayout) }

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nextVersion returns v, or one above the last version published for the
// entity when v is 0, and records it.
func (s *Service) nextVersion(kind, id string, v int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := kind + "." + id
	if v == 0 {
		v = s.versions[key] + 1
	}
	if v > s.versions[key] {
		s.versions[key] = v
	}
	return v
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// eventBody completes e's zero values and returns its wire body.
func (s *Service) eventBody(e *Event) any {
	if e.Status == "" {
		e.Status = "active"
	}
	if e.Category == "" {
		e.Category = "test"
	}
	if e.Title == "" {
		e.Title = "Event " + e.ID
	}
	if e.UpdatedAt.IsZero() {
		e.UpdatedAt = now()
	}
	e.Version = s.nextVersion("event", e.ID, e.Version)
	body := map[string]any{
		"universal_id": e.ID, "version": e.Version, "title": e.Title, "category": e.Category,
		"status": e.Status, "merged_into": nullable(e.MergedInto),
		"venue_a_event_ticker": nullable(e.Venues[0]), "venue_b_event_slug": nullable(e.Venues[1]),
		"venue_c_event_id": nullable(e.Venues[2]), "venue_d_event_id": nullable(e.Venues[3]),
		"volume": e.Volume, "updated_at": stamp(e.UpdatedAt),
	}
	if e.Matches != nil {
		body["matches"] = e.Matches
	}
	return body
}

func (s *Service) marketBody(m *Market) any {
	if m.Status == "" {
		m.Status = "active"
	}
	if m.Title == "" {
		m.Title = "Market " + m.ID
	}
	if m.Venues == nil {
		m.Venues = map[string]string{}
	}
	if m.UpdatedAt.IsZero() {
		m.UpdatedAt = now()
	}
	m.Version = s.nextVersion("market", m.ID, m.Version)
	body := map[string]any{
		"universal_id": m.ID, "event_id": m.EventID, "version": m.Version, "title": m.Title,
		"status": m.Status, "venues": m.Venues, "resolved_at": nil, "result": nil,
		"updated_at": stamp(m.UpdatedAt),
	}
	if m.Matches != nil {
		body["matches"] = m.Matches
	}
	if m.Status == "resolved" {
		if m.ResolvedAt.IsZero() {
			m.ResolvedAt = m.UpdatedAt
		}
		if m.Result == "" {
			m.Result = "yes"
		}
		body["resolved_at"], body["result"] = stamp(m.ResolvedAt), m.Result
	}
	return body
}

func (s *Service) priceBody(p *Price) any {
	if p.TS.IsZero() {
		p.TS = now()
	}
	p.Version = s.nextVersion("price", p.MarketID, p.Version)
	quotes := make(map[string]any, len(p.Quotes))
	for v, q := range p.Quotes {
		quotes[v] = map[string]float64{"bid": q.Bid, "ask": q.Ask, "last": q.Last, "volume_24h": q.Volume24h}
	}
	return map[string]any{"market_id": p.MarketID, "version": p.Version, "ts": stamp(p.TS), "quotes": quotes}
}

func tradeBody(tr *Trade) any {
	if tr.TS.IsZero() {
		tr.TS = now()
	}
	if tr.Side == "" {
		tr.Side = "buy"
	}
	if tr.Venue == "" {
		tr.Venue = Venues[0]
	}
	return map[string]any{
		"market_id": tr.MarketID, "trade_id": tr.TradeID, "venue": tr.Venue,
		"price": tr.Price, "size": tr.Size, "side": tr.Side, "ts": stamp(tr.TS),
	}
}

// Publish publishes body (marshalled to JSON unless it is a []byte) to the
// world's subject of kind ("event", "market", "price", "trade") and id, and
// returns once JetStream has stored it. It does not wait for the API: use
// the Put methods for that. Invalid bodies are welcome (they go to the
// world's DLQ).
func (s *Service) Publish(kind, id string, body any) {
	s.t.Helper()
	data, ok := body.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(body); err != nil {
			s.t.Fatalf("servicetest: encode %s %s: %v", kind, id, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.wait)
	defer cancel()
	subject := s.Names.SubjectPrefix + "." + kind + "." + id
	msgID := subject + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := s.js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID)); err != nil {
		s.t.Fatalf("servicetest: publish %s: %v", subject, err)
	}
}

// PublishEvent publishes e (zero values filled in, see Event) without
// waiting for the API. Likewise PublishMarket, PublishPrice, PublishTrade.
func (s *Service) PublishEvent(e *Event) { s.t.Helper(); s.Publish("event", e.ID, s.eventBody(e)) }

// PublishMarket publishes m without waiting for the API.
func (s *Service) PublishMarket(m *Market) {
	s.t.Helper()
	s.Publish("market", m.ID, s.marketBody(m))
}

// PublishPrice publishes p without waiting for the API.
func (s *Service) PublishPrice(p *Price) {
	s.t.Helper()
	s.Publish("price", p.MarketID, s.priceBody(p))
}

// PublishTrade publishes tr without waiting for the API.
func (s *Service) PublishTrade(tr *Trade) {
	s.t.Helper()
	s.Publish("trade", tr.MarketID, tradeBody(tr))
}

// PutEvent publishes e and waits until the API serves it: a served event
// (two or more venue ids, not merged) until its read shows e's updated_at,
// any other until its read answers 404.
func (s *Service) PutEvent(e *Event) {
	s.t.Helper()
	s.PublishEvent(e)
	s.awaitEvent(e)
}

// PutMarket publishes m and waits until its event's read lists it (among
// markets or recently_resolved) with m's title and status. Its event must
// be served.
func (s *Service) PutMarket(m *Market) {
	s.t.Helper()
	s.PublishMarket(m)
	s.awaitMarket(m)
}

// PutPrice publishes p and waits until the snapshot serves p's version (or
// a later one). Its market must be served.
func (s *Service) PutPrice(p *Price) {
	s.t.Helper()
	s.PublishPrice(p)
	s.awaitPrices([]*Price{p})
}

// PutTrade publishes tr and waits until the market's trades list it. Its
// market must be served.
func (s *Service) PutTrade(tr *Trade) {
	s.t.Helper()
	s.PublishTrade(tr)
	s.Await(fmt.Sprintf("trade %s of market %s served", tr.TradeID, tr.MarketID), func() (bool, string) {
		var page struct {
			Data []struct {
				TradeID string `json:"trade_id"`
			} `json:"data"`
		}
		status, err := s.get("/public/v1/markets/"+tr.MarketID+"/trades?limit=200", &page)
		if err != nil || status != 200 {
			return false, fmt.Sprintf("status %d %v", status, err)
		}
		for _, x := range page.Data {
			if x.TradeID == tr.TradeID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d trades, not it", len(page.Data))
	})
}

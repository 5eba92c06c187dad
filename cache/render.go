package cache

import (
	"slices"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/marketdata/marketdata/store"
)

// MaxRecentlyResolved is how many resolved markets an event read shows.
const MaxRecentlyResolved = 6

// MaxTrades is how many of a market's newest trades the cache keeps.
const MaxTrades = 200

// Rules are the time-dependent parts of what is served.
type Rules struct {
	// Retention is how long a resolved market counts as recently resolved.
	Retention time.Duration
	// Now is the clock; rendering with the same Now is deterministic.
	Now func() time.Time
}

func (r Rules) recentlyResolved(m *store.Market) bool {
	return m.Status == store.StatusResolved && m.ResolvedAt != nil && m.ResolvedAt.After(r.Now().Add(-r.Retention))
}

// EventDocument is the rendered form of one event's cache entries.
type EventDocument struct {
	ID  string
	Rev int64
	// Body is the wire JSON of the event read; nil when the event is not
	// served (unknown, fewer than two venues, or merged).
	Body []byte
	// MergedInto is set when the event was merged into another.
	MergedInto string
	// Summary is the listing item; nil unless the event is served and active.
	Summary []byte
	// Sets are the listing index sets the event belongs to (see setNames).
	Sets []string
	// Volume ranks listed events for search.
	Volume float64
	// Links is what the match filters ask of a listed event's venue links
	// (linksField); "" when it is not listed or a link has no metadata.
	Links string
}

// MarketDocument is the rendered form of one market's price item.
type MarketDocument struct {
	ID     string
	Rev    int64
	Served bool
	// Body is the price item; nil when the market is not served or has no price.
	Body []byte
	// Inverted names the venues whose trades the market shows inverted
	// (invertedVenues); "" when none.
	Inverted string
}

type eventSummary struct {
	UniversalID       string  `json:"universal_id"`
	Title             string  `json:"title"`
	Category          string  `json:"category"`
	Status            string  `json:"status"`
	VenueAEventTicker *string `json:"venue_a_event_ticker"`
	VenueBEventSlug   *string `json:"venue_b_event_slug"`
	VenueCEventID     *string `json:"venue_c_event_id"`
	VenueDEventID     *string `json:"venue_d_event_id"`
	VenueCount        int     `json:"venue_count"`
	Volume            float64 `json:"volume"`
	UpdatedAt         string  `json:"updated_at"`
	// Matches: see venueMatches.
	Matches map[string]*store.Match `json:"matches"`
}

type eventRead struct {
	eventSummary
	Markets          []marketItem `json:"markets"`
	RecentlyResolved []marketItem `json:"recently_resolved"`
}

type marketItem struct {
	UniversalID string            `json:"universal_id"`
	EventID     string            `json:"event_id"`
	Title       string            `json:"title"`
	Status      string            `json:"status"`
	Venues      map[string]string `json:"venues"`
	ResolvedAt  *string           `json:"resolved_at,omitempty"`
	Result      *string           `json:"result,omitempty"`
	// Matches: see venueMatches.
	Matches map[string]*store.Match `json:"matches"`
}

type priceItem struct {
	MarketID string `json:"market_id"`
	EventID  string `json:"event_id"`
	Status   string `json:"status"`
	// Quotes is the stored map[string]store.Quote, or a map[string]quoteItem
	// when a venue is shown inverted (shownQuotes).
	Quotes    any      `json:"quotes"`
	BestBid   *float64 `json:"best_bid"`
	BestAsk   *float64 `json:"best_ask"`
	Version   int64    `json:"version"`
	UpdatedAt string   `json:"updated_at"`
}

type tradeItem struct {
	TradeID  string  `json:"trade_id"`
	MarketID string  `json:"market_id"`
	Venue    string  `json:"venue"`
	Price    float64 `json:"price"`
	Size     float64 `json:"size"`
	Side     string  `json:"side"`
	TS       string  `json:"ts"`
	// Inverted marks a complement venue's trade, shown at 1 − price.
	Inverted bool `json:"inverted,omitempty"`
}

// FormatTime is the wire form of every time: RFC 3339 in UTC.
func FormatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}

// marshal encodes as encoding/json does with HTML escaping off (map keys
// sorted, invalid UTF-8 replaced, U+2028 and U+2029 escaped), without a
// trailing newline. It is segmentio's encoder, which writes the same bytes
// (FuzzMarshalMatchesStdlib) for about half the CPU and garbage: rendering
// was a tenth of ingest's CPU on the 250,000-market world.
func marshal(v any) []byte {
	b, err := json.Append(nil, v, json.SortMapKeys)
	if err != nil {
		// Every rendered type is plain data with finite numbers (the decoder
		// rejects NaN and infinities cannot be written in JSON).
		panic("cache: encode: " + err.Error())
	}
	return b
}

func summaryOf(e *store.Event) eventSummary {
	return eventSummary{
		UniversalID: e.ID, Title: e.Title, Category: e.Category, Status: e.Status,
		VenueAEventTicker: e.VenueIDs[0], VenueBEventSlug: e.VenueIDs[1],
		VenueCEventID: e.VenueIDs[2], VenueDEventID: e.VenueIDs[3],
		VenueCount: e.VenueCount(), Volume: e.Volume, UpdatedAt: FormatTime(e.UpdatedAt),
		Matches: eventMatches(e),
	}
}

func itemOf(m *store.Market) marketItem {
	it := marketItem{UniversalID: m.ID, EventID: m.EventID, Title: m.Title, Status: m.Status, Venues: m.Venues}
	if m.Status == store.StatusResolved {
		if m.ResolvedAt != nil {
			s := FormatTime(*m.ResolvedAt)
			it.ResolvedAt = &s
		}
		it.Result = m.Result
	}
	if it.Venues == nil {
		it.Venues = map[string]string{}
	}
	it.Matches = marketMatches(m)
	return it
}

// RenderEvent renders an event's read document and listing entry.
func (r Rules) RenderEvent(d store.EventDoc) EventDocument {
	out := EventDocument{ID: d.ID, Rev: d.Rev}
	e := d.Event
	if e == nil {
		return out
	}
	if e.Status == store.StatusMerged {
		if e.MergedInto != nil {
			out.MergedInto = *e.MergedInto
		}
		return out
	}
	if !e.Served() {
		return out
	}
	doc := eventRead{eventSummary: summaryOf(e), Markets: []marketItem{}, RecentlyResolved: []marketItem{}}
	var resolved []*store.Market
	for i := range d.Markets {
		m := &d.Markets[i]
		switch {
		case m.Status == store.StatusActive:
			doc.Markets = append(doc.Markets, itemOf(m))
		case r.recentlyResolved(m):
			resolved = append(resolved, m)
		}
	}
	// Newest resolution first; ties by ascending id so the order is total.
	slices.SortStableFunc(resolved, func(a, b *store.Market) int {
		if c := b.ResolvedAt.Compare(*a.ResolvedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, m := range resolved[:min(len(resolved), MaxRecentlyResolved)] {
		doc.RecentlyResolved = append(doc.RecentlyResolved, itemOf(m))
	}
	out.Body = marshal(doc)
	if e.Status == store.StatusActive {
		out.Summary = marshal(doc.eventSummary)
		out.Sets = setNames(e)
		out.Volume = e.Volume
		out.Links = linksField(e.Links())
	}
	return out
}

// setNames lists the listing sets an active served event belongs to: one per
// combination of filters it satisfies, each filter either its value or "*".
// min_venues 1 and 2 are the same set ("1"): every served event has two.
func setNames(e *store.Event) []string {
	cats := []string{"*", e.Category}
	venues := []string{"*"}
	for i, v := range e.VenueIDs {
		if v != nil {
			venues = append(venues, store.Venues[i])
		}
	}
	mins := []string{"1"}
	if n := e.VenueCount(); n >= 3 {
		mins = append(mins, "3")
		if n >= 4 {
			mins = append(mins, "4")
		}
	}
	var out []string
	for _, c := range cats {
		for _, v := range venues {
			for _, m := range mins {
				out = append(out, SetName(c, v, m))
			}
		}
	}
	return out
}

// SetName names the listing set for a filter combination; an empty filter is "*".
func SetName(category, venue, minVenues string) string {
	if category == "" {
		category = "*"
	}
	if venue == "" {
		venue = "*"
	}
	if minVenues == "" || minVenues == "2" {
		minVenues = "1"
	}
	return category + ":" + venue + ":" + minVenues
}

// MarketServed reports whether a market is in the served set: its event is
// served and the market is active or recently resolved.
func (r Rules) MarketServed(d store.MarketDoc) bool {
	return d.Market != nil && d.Event != nil && d.Event.Served() &&
		(d.Market.Status == store.StatusActive || r.recentlyResolved(d.Market))
}

// RenderMarket renders a market's price item.
func (r Rules) RenderMarket(d store.MarketDoc) MarketDocument {
	out := MarketDocument{ID: d.ID, Rev: d.Rev, Served: r.MarketServed(d), Inverted: invertedVenues(d.Market)}
	if !out.Served || d.Price == nil {
		return out
	}
	out.Body = marshal(priceItemOf(d))
	return out
}

// priceItemOf is a served market's price item (d has a market and a price).
func priceItemOf(d store.MarketDoc) priceItem {
	p := priceItem{
		MarketID: d.ID, EventID: d.Market.EventID, Status: d.Market.Status,
		Version: d.Price.Version, UpdatedAt: FormatTime(d.Price.TS),
	}
	p.Quotes, p.BestBid, p.BestAsk = shownQuotes(d.Price.Quotes, &d.Market.Matches)
	return p
}

// RenderTrade renders a trade list item as the venue sent it: what the
// market's trade list caches. A market shows the items of its complement
// venues inverted (invertTrades), as it is when read.
func RenderTrade(t *store.Trade) []byte {
	return marshal(tradeItemOf(t))
}

func tradeItemOf(t *store.Trade) tradeItem {
	return tradeItem{
		TradeID: t.TradeID, MarketID: t.MarketID, Venue: t.Venue, Price: t.Price,
		Size: t.Size, Side: t.Side, TS: FormatTime(t.TS),
	}
}

// TradeScore orders a market's trades: microseconds since the epoch, exact in
// a float64. Trades in the same microsecond are ordered by their member bytes,
// which begin with the trade id, so the list is newest first, then trade id
// descending.
func TradeScore(t *store.Trade) float64 {
	return float64(t.TS.UnixMicro())
}

package client

import "time"

// The answers' shapes, field for field as contract §3 gives them. Times are
// time.Time in UTC; a value the API may send as null is a pointer (an
// absent venue id, a price no venue quotes); a field the API sends only in
// some states is tagged omitempty (a market's resolved_at and result).

// Venue names, as the API writes them.
const (
	VenueA = "venue_a"
	VenueB = "venue_b"
	VenueC = "venue_c"
	VenueD = "venue_d"
)

// Venues are the four venues in order.
var Venues = [4]string{VenueA, VenueB, VenueC, VenueD}

// Event is an event summary: an item of /events and of search.
type Event struct {
	UniversalID string `json:"universal_id"`
	Title       string `json:"title"`
	Category    string `json:"category"`
	// Status is "active", or "resolved" for an event read of a resolved
	// event.
	Status string `json:"status"`
	// The venues' own event ids; nil where the event has none on that venue.
	VenueAEventTicker *string `json:"venue_a_event_ticker"`
	VenueBEventSlug   *string `json:"venue_b_event_slug"`
	VenueCEventID     *string `json:"venue_c_event_id"`
	VenueDEventID     *string `json:"venue_d_event_id"`
	// VenueCount counts the non-nil venue ids (2 to 4 for a served event).
	VenueCount int       `json:"venue_count"`
	Volume     float64   `json:"volume"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Matches holds, for each venue the event has an id on, how sure the
	// matcher is of that link; nil for a venue it sent no metadata for.
	Matches map[string]*Match `json:"matches"`
}

// Relations a venue's event or market can have to ours (Match.Relation).
const (
	// RelationIdentity is the same question.
	RelationIdentity = "identity"
	// RelationComplement is the venue's YES being our NO: its quotes and
	// trades are shown in our terms (1 − price), marked Inverted.
	RelationComplement = "complement"
	// RelationSubset and RelationSuperset resolve YES only if the other
	// does; RelationOverlap is a related question. Their quotes never make
	// the best prices.
	RelationSubset   = "subset"
	RelationSuperset = "superset"
	RelationOverlap  = "overlap"
)

// Match is the matcher's metadata for one venue's link.
type Match struct {
	// Relation is one of the Relation constants.
	Relation string `json:"relation"`
	// Confidence is how sure the matcher is, in [0,1].
	Confidence float64 `json:"confidence"`
	// Method is how the link was made: "manual", "rules", "model", …
	Method string `json:"method"`
}

// VenueIDs maps each venue that has an id for the event to that id.
func (e *Event) VenueIDs() map[string]string {
	m := make(map[string]string, 4)
	for i, id := range []*string{e.VenueAEventTicker, e.VenueBEventSlug, e.VenueCEventID, e.VenueDEventID} {
		if id != nil {
			m[Venues[i]] = *id
		}
	}
	return m
}

// EventDetail is an event read: the summary, its active markets and up to
// 6 recently resolved ones (newest resolved_at first).
type EventDetail struct {
	Event
	Markets          []Market `json:"markets"`
	RecentlyResolved []Market `json:"recently_resolved"`
}

// Market is a market of an event read.
type Market struct {
	UniversalID string `json:"universal_id"`
	EventID     string `json:"event_id"`
	Title       string `json:"title"`
	// Status is "active" or "resolved".
	Status string `json:"status"`
	// Venues maps a venue to that venue's own market id.
	Venues map[string]string `json:"venues"`
	// ResolvedAt and Result are set on a resolved market only.
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
	Result     string     `json:"result,omitempty"`
	// Matches holds, for each venue in Venues, how sure the matcher is
	// that the venue's market is this one; nil for a venue it sent no
	// metadata for.
	Matches map[string]*Match `json:"matches"`
}

// Quote is one venue's quote of a market; Bid, Ask and Last are nil when
// the venue has none.
type Quote struct {
	Bid       *float64 `json:"bid"`
	Ask       *float64 `json:"ask"`
	Last      *float64 `json:"last"`
	Volume24h float64  `json:"volume_24h"`
	// Inverted marks a complement venue's quote, shown in the market's
	// terms: Bid is 1 − the venue's ask, Ask 1 − its bid, Last 1 − its last.
	Inverted bool `json:"inverted,omitempty"`
}

// Price is a market's price snapshot.
type Price struct {
	MarketID string `json:"market_id"`
	EventID  string `json:"event_id"`
	// Status is the market's: "active" or "resolved".
	Status string `json:"status"`
	// Quotes maps a venue to its quote.
	Quotes map[string]Quote `json:"quotes"`
	// BestBid is the highest bid over the venues, BestAsk the lowest ask;
	// nil when no venue quotes one. Subset, superset and overlap venues'
	// quotes do not count; a complement venue's count as shown (inverted).
	BestBid *float64 `json:"best_bid"`
	BestAsk *float64 `json:"best_ask"`
	// Version grows with every change of the market's price.
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Snapshot is the answer of /prices/snapshot: the prices of the asked-for
// markets and the ids not served (or without a price yet), both in the
// order asked.
type Snapshot struct {
	Data    []Price  `json:"data"`
	Missing []string `json:"missing"`
}

// Trade is one trade of a market.
type Trade struct {
	TradeID  string  `json:"trade_id"`
	MarketID string  `json:"market_id"`
	Venue    string  `json:"venue"`
	Price    float64 `json:"price"`
	Size     float64 `json:"size"`
	// Side is "buy" or "sell".
	Side string    `json:"side"`
	TS   time.Time `json:"ts"`
	// Inverted marks a complement venue's trade, shown at 1 − its price.
	Inverted bool `json:"inverted,omitempty"`
}

// Key is the answer of /key: the calling key and its account's window.
type Key struct {
	KeyID       string    `json:"key_id"`
	Last4       string    `json:"last4"`
	AccountID   string    `json:"account_id"`
	Scopes      []string  `json:"scopes"`
	IPAllowlist []string  `json:"ip_allowlist"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	// Limit is the account's requests per window of WindowS seconds.
	Limit   int   `json:"limit"`
	WindowS int64 `json:"window_s"`
}

// AccountKey is a key of the caller's account, as /account/keys lists it
// (never its secret).
type AccountKey struct {
	KeyID       string     `json:"key_id"`
	AccountID   string     `json:"account_id"`
	Last4       string     `json:"last4"`
	Scopes      []string   `json:"scopes"`
	IPAllowlist []string   `json:"ip_allowlist"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
	// Status is "active", "revoked" or "expired".
	Status string `json:"status"`
}

// UsageRow is the number of requests of one route on one UTC day.
type UsageRow struct {
	// Date is the UTC day, "YYYY-MM-DD" (a calendar day, not an instant:
	// kept as the API writes it; DateTime parses it).
	Date  string `json:"date"`
	Route string `json:"route"`
	Count int64  `json:"count"`
}

// DateTime is the row's day as midnight UTC.
func (r *UsageRow) DateTime() (time.Time, error) {
	return time.Parse(time.DateOnly, r.Date)
}

// page is a cursor-paged list answer.
type page[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

// list is a list answer without a cursor.
type list[T any] struct {
	Data []T `json:"data"`
}

// Package store is the Postgres source of truth: the schema and its migrations,
// the model types, versioned batch writes and the reads that rebuild the cache.
package store

import "time"

// Venues are the four trading venues, in their canonical order.
var Venues = [4]string{"venue_a", "venue_b", "venue_c", "venue_d"}

// VenueIndex returns the position of venue in Venues, or -1 when unknown.
func VenueIndex(venue string) int {
	for i, v := range Venues {
		if v == venue {
			return i
		}
	}
	return -1
}

// Event statuses.
const (
	StatusActive   = "active"
	StatusResolved = "resolved"
	StatusMerged   = "merged"
)

// Event is a cross-venue grouping of markets, as the matcher last published it.
type Event struct {
	ID         string
	Version    int64
	Title      string
	Category   string
	Status     string
	MergedInto *string
	// VenueIDs holds the event's own id on each venue, in Venues order; nil when absent.
	VenueIDs  [4]*string
	Volume    float64
	UpdatedAt time.Time
	// Matches is the matcher's metadata per venue (all nil: none sent).
	Matches Matches
}

// VenueCount is the number of venues the event has an id on.
func (e *Event) VenueCount() int {
	n := 0
	for _, v := range e.VenueIDs {
		if v != nil {
			n++
		}
	}
	return n
}

// Served reports whether the event is in the served set: at least two venue
// ids and not merged.
func (e *Event) Served() bool {
	return e.Status != StatusMerged && e.VenueCount() >= 2
}

// Market belongs to one event.
type Market struct {
	ID         string
	EventID    string
	Version    int64
	Title      string
	Status     string
	Venues     map[string]string
	ResolvedAt *time.Time
	Result     *string
	UpdatedAt  time.Time
	// Matches is the matcher's metadata per venue (all nil: none sent).
	Matches Matches
}

// Quote is one venue's top of book for a market. Absent sides are nil.
type Quote struct {
	Bid       *float64 `json:"bid"`
	Ask       *float64 `json:"ask"`
	Last      *float64 `json:"last"`
	Volume24h float64  `json:"volume_24h"`
}

// Price is the latest full set of quotes of a market.
type Price struct {
	MarketID string
	Version  int64
	TS       time.Time
	Quotes   map[string]Quote
}

// Trade is one immutable execution on a venue.
type Trade struct {
	MarketID string
	TradeID  string
	Venue    string
	Price    float64
	Size     float64
	Side     string
	TS       time.Time
}

// Reject records a message that failed validation or exhausted its deliveries.
type Reject struct {
	Subject    string
	Kind       string
	Reason     string
	Payload    []byte
	StreamSeq  uint64
	ReceivedAt time.Time
}

// EventVenueFields are the wire names of an event's venue id fields, in Venues order.
var EventVenueFields = [4]string{"venue_a_event_ticker", "venue_b_event_slug", "venue_c_event_id", "venue_d_event_id"}

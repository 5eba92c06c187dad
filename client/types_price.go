package client

import "time"

// Price is a market's current price (contract §3): what /prices/snapshot
// lists and what a stream's "price" message carries.
type Price struct {
	// MarketID is the market's universal id.
	MarketID string `json:"market_id"`
	// EventID is the universal id of the market's event.
	EventID string `json:"event_id"`
	// Status is the market's status: "active" or "resolved".
	Status string `json:"status"`
	// Quotes maps a venue ("venue_a" … "venue_d") to its top of book.
	Quotes map[string]Quote `json:"quotes"`
	// BestBid is the highest bid over the venues; nil when no venue bids.
	BestBid *float64 `json:"best_bid"`
	// BestAsk is the lowest ask over the venues; nil when no venue asks.
	BestAsk *float64 `json:"best_ask"`
	// Version is the price's version, raised by every change of the
	// market's quotes.
	Version int64 `json:"version"`
	// UpdatedAt is when the quotes were taken (UTC).
	UpdatedAt time.Time `json:"updated_at"`
}

// Quote is one venue's top of book for a market. An absent side is nil.
type Quote struct {
	Bid       *float64 `json:"bid"`
	Ask       *float64 `json:"ask"`
	Last      *float64 `json:"last"`
	Volume24h float64  `json:"volume_24h"`
}

package client

import (
	"context"
	"net/url"
	"time"
)

// Candle intervals, as the API names them.
const (
	Interval1m  = "1m"
	Interval5m  = "5m"
	Interval15m = "15m"
	Interval1h  = "1h"
	Interval4h  = "4h"
	Interval1d  = "1d"
)

// CandleQuery selects the candles Candles reads. Zero values leave a
// parameter to the server's default.
type CandleQuery struct {
	// Interval is one of Interval1m … Interval1d ("": 1h).
	Interval string
	// From and To bound the range: the buckets from the one holding From
	// up to the one holding the instant before To (zero To: now; zero
	// From: To − 500 intervals). At most 5,000 candles: a wider range is a
	// 422 *Error saying how many it holds.
	From, To time.Time
	// Venue is one venue (VenueA, …) or "all" ("": all, the market's
	// cross-venue series).
	Venue string
}

// Candle is one bucket of a market's series (contract §3 "Candle").
type Candle struct {
	// Start is the bucket's start, aligned on its interval since 00:00 UTC.
	Start time.Time `json:"start"`
	// Trades counts the bucket's trades; Volume sums their sizes.
	Trades int64   `json:"trades"`
	Volume float64 `json:"volume"`
	// Trade is the trade prices' OHLC; nil when the bucket has no trade.
	Trade *OHLC `json:"trade"`
	// Bid and Ask are the best bid's and ask's OHLC over the bucket (Open
	// is the value in force when it starts); nil before the first price.
	Bid *OHLC `json:"bid"`
	Ask *OHLC `json:"ask"`
}

// OHLC is an open, high, low and close. In a bid or ask a field is nil
// for a side no counted venue quoted; in a trade none is.
type OHLC struct {
	Open  *float64 `json:"open"`
	High  *float64 `json:"high"`
	Low   *float64 `json:"low"`
	Close *float64 `json:"close"`
}

// Candles reads a market's candles, oldest first
// (GET /public/v1/markets/{id}/candles). A marketID that is not a universal
// id is an error wrapping ErrInvalidID, and nothing is sent.
func (c *Client) Candles(ctx context.Context, marketID string, q CandleQuery) ([]Candle, error) {
	if err := checkID("Candles", marketID); err != nil {
		return nil, err
	}
	query := url.Values{}
	setString(query, "interval", q.Interval)
	setString(query, "venue", q.Venue)
	setTime(query, "from", q.From)
	setTime(query, "to", q.To)
	var l list[Candle]
	if _, err := c.do(ctx, "/markets/"+url.PathEscape(marketID)+"/candles", query, "", &l); err != nil {
		return nil, err
	}
	return nonNil(l.Data), nil
}

// setTime sets an RFC 3339 parameter (UTC, to the nanosecond); the zero
// time leaves it to the server.
func setTime(q url.Values, name string, t time.Time) {
	if !t.IsZero() {
		q.Set(name, t.UTC().Format(time.RFC3339Nano))
	}
}

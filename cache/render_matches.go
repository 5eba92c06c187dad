package cache

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/marketdata/marketdata/store"
)

// Match metadata in what is served (contract §3 "Match metadata"): event
// summaries, event reads and markets carry it; a complement venue's quotes
// and trades are shown in the market's terms (1 − price) and marked
// inverted; the best prices leave out subset, superset and overlap venues. A
// document without metadata renders as it did before, plus a matches object
// of nulls.

// venueMatches is a document's matches object: one key per venue it has an
// id on, holding that venue's metadata or null.
func venueMatches(ms *store.Matches, has func(i int) bool) map[string]*store.Match {
	out := make(map[string]*store.Match, len(ms))
	for i, v := range store.Venues {
		if has(i) {
			out[v] = ms[i]
		}
	}
	return out
}

func eventMatches(e *store.Event) map[string]*store.Match {
	return venueMatches(&e.Matches, func(i int) bool { return e.VenueIDs[i] != nil })
}

func marketMatches(m *store.Market) map[string]*store.Match {
	return venueMatches(&m.Matches, func(i int) bool { _, ok := m.Venues[store.Venues[i]]; return ok })
}

// quoteItem is a quote as served when the market has a complement venue:
// store.Quote's fields, plus inverted on that venue's.
type quoteItem struct {
	Bid       *float64 `json:"bid"`
	Ask       *float64 `json:"ask"`
	Last      *float64 `json:"last"`
	Volume24h float64  `json:"volume_24h"`
	Inverted  bool     `json:"inverted,omitempty"`
}

// inverted is a complement venue's quote as served (store.Quote.Invert).
func inverted(q store.Quote) quoteItem {
	i := q.Invert()
	return quoteItem{Bid: i.Bid, Ask: i.Ask, Last: i.Last, Volume24h: i.Volume24h, Inverted: true}
}

// shownQuotes returns a price's quotes as served, and the best bid and ask
// over the venues that count (store.Matches.Counts). Quotes are the stored
// map itself unless a venue is shown inverted: the common case copies
// nothing.
func shownQuotes(quotes map[string]store.Quote, ms *store.Matches) (shown any, bestBid, bestAsk *float64) {
	var items map[string]quoteItem
	for v := range quotes {
		if i := store.VenueIndex(v); i >= 0 && ms.Inverted(i) {
			items = make(map[string]quoteItem, len(quotes))
			break
		}
	}
	for v, q := range quotes {
		i := store.VenueIndex(v)
		bid, ask := q.Bid, q.Ask
		if items != nil {
			it := quoteItem{Bid: q.Bid, Ask: q.Ask, Last: q.Last, Volume24h: q.Volume24h}
			if i >= 0 && ms.Inverted(i) {
				it = inverted(q)
			}
			items[v], bid, ask = it, it.Bid, it.Ask
		}
		if i >= 0 && !ms.Counts(i) {
			continue
		}
		if bid != nil && (bestBid == nil || *bid > *bestBid) {
			bestBid = bid
		}
		if ask != nil && (bestAsk == nil || *ask < *bestAsk) {
			bestAsk = ask
		}
	}
	if items != nil {
		return items, bestBid, bestAsk
	}
	if quotes == nil {
		quotes = map[string]store.Quote{}
	}
	return quotes, bestBid, bestAsk
}

// invertedVenues names the venues whose quotes and trades a market shows
// inverted, separated by spaces; "" when none. It is stored with the
// market's price item, so that its trade list, cached as the venues sent
// the trades, is shown in the market's terms as the market is now.
func invertedVenues(m *store.Market) string {
	if m == nil {
		return ""
	}
	var out []string
	for i, v := range store.Venues {
		if m.Matches.Inverted(i) {
			out = append(out, v)
		}
	}
	return strings.Join(out, " ")
}

// tradeInverted reports whether the market shows a trade of venue inverted.
func tradeInverted(m *store.Market, venue string) bool {
	i := store.VenueIndex(venue)
	return i >= 0 && m.Matches.Inverted(i)
}

// renderTradeAs renders a trade item as served: at 1 − price, marked
// inverted, when its venue is a complement venue of the market.
func renderTradeAs(t *store.Trade, inverted bool) []byte {
	it := tradeItemOf(t)
	if inverted {
		it.Price, it.Inverted = store.InvertPrice(it.Price), true
	}
	return marshal(it)
}

// invertTrades shows cached trade items (RenderTrade's) in the market's
// terms: the items of the venues named in venues (invertedVenues) are
// rendered again inverted; the others are returned as they are.
func invertTrades(items [][]byte, venues string) [][]byte {
	if venues == "" {
		return items
	}
	names := strings.Fields(venues)
	for k, b := range items {
		if !mentionsVenue(b, names) {
			continue
		}
		var it tradeItem
		if err := json.Unmarshal(b, &it); err != nil {
			continue // not ours: shown as cached
		}
		for _, v := range names {
			if it.Venue == v && !it.Inverted {
				it.Price, it.Inverted = store.InvertPrice(it.Price), true
				items[k] = marshal(it)
				break
			}
		}
	}
	return items
}

// mentionsVenue is a quick test that an item may be of one of the venues,
// which spares decoding the others.
func mentionsVenue(b []byte, venues []string) bool {
	for _, v := range venues {
		if bytes.Contains(b, []byte(`"venue":"`+v+`"`)) {
			return true
		}
	}
	return false
}

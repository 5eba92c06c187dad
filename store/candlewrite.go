package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// candleModes is what the candles take of a market's match metadata, one
// character per venue in Venues order, as candle_modes (migration 008) gives
// it from the markets row: 'n' counts as quoted, 'i' counts inverted
// (complement), 'x' does not count in the cross-venue series. A market not
// known yet has no metadata: every venue counts as quoted.
func candleModes(m *Market) string {
	b := []byte("nnnn")
	if m == nil {
		return string(b)
	}
	for i := range b {
		switch {
		case m.Matches.Inverted(i):
			b[i] = 'i'
		case !m.Matches.Counts(i):
			b[i] = 'x'
		}
	}
	return string(b)
}

// statement picks the batch statement for b's shape.
func (s *Store) statement(b *Batch) string {
	return s.stmts.sql[b2i(len(b.Prices) > 0)][b2i(len(b.Trades) > 0)]
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// batchArgs are the batch statement's parameters for b (see candlesql.go),
// and the deps cache entries of its prices' markets, in b.Prices order.
func (s *Store) batchArgs(b *Batch) ([]any, []depsEntry, error) {
	var args []any
	var cached []depsEntry
	if n := len(b.Prices); n > 0 {
		ids, quotes, modes := make([]string, n), make([]string, n), make([]string, n)
		versions, ts, stamps := make([]int64, n), make([]time.Time, n), make([]int64, n)
		for i, p := range b.Prices {
			qs, err := json.Marshal(p.Quotes)
			if err != nil {
				return nil, nil, fmt.Errorf("store: encode quotes of market %s: %w", p.MarketID, err)
			}
			ids[i], versions[i], ts[i], quotes[i] = p.MarketID, p.Version, p.TS, string(qs)
		}
		// Entries are taken once: the rendering uses the rows of the stamp
		// that was sent, even if another applier records a newer one meanwhile.
		cached = s.deps.get(ids)
		byMarket := make(map[string]string, n)
		for i, e := range cached {
			stamps[i], modes[i] = e.deps, candleModes(e.market)
			byMarket[ids[i]] = modes[i]
		}
		args = append(args, ids, versions, ts, quotes, stamps, modes)
		if s.stmts.candles {
			args = append(args, pointArgs(b.candlePoints(), byMarket)...)
		}
	}
	if len(b.Trades) > 0 {
		ta := s.tradeArgs(b.Trades)
		if !s.stmts.candles {
			ta = ta[:tradesPlainParams]
		}
		args = append(args, ta...)
	}
	return args, cached, nil
}

// tradeIDsArg is the trade ids among a batch statement's args (the trades'
// first parameter).
func (s *Store) tradeIDsArg(args []any) any {
	n := tradesParams
	if !s.stmts.candles {
		n = tradesPlainParams
	}
	return args[len(args)-n]
}

// candlePoints are the batch's price messages as they came, before Dedup
// kept one per market: each is a point of the candles.
func (b *Batch) candlePoints() []Price {
	if b.points != nil {
		return b.points
	}
	return b.Prices
}

// pointArgs are the batch statement's point parameters: one point per market
// and version (a message delivered twice in a batch counts once), with its
// series computed from modes (its market's, by id; "nnnn" when absent): each
// venue's bid and ask in the market's terms (a complement venue inverted),
// and the best bid and ask over the venues that count.
func pointArgs(points []Price, modes map[string]string) []any {
	type key struct {
		id      string
		version int64
	}
	seen := make(map[key]bool, len(points))
	count := make(map[string]int, len(points))
	ps := make([]Price, 0, len(points))
	for _, p := range points {
		k := key{p.MarketID, p.Version}
		if seen[k] {
			continue
		}
		seen[k] = true
		count[p.MarketID]++
		ps = append(ps, p)
	}
	n := len(ps)
	ids, versions, ts := make([]string, n), make([]int64, n), make([]time.Time, n)
	multi, present, ms := make([]bool, n), make([]int32, n), make([]string, n)
	var sides [2 + 2*len(Venues)][]*float64
	for k := range sides {
		sides[k] = make([]*float64, n)
	}
	for i, p := range ps {
		ids[i], versions[i], ts[i], multi[i] = p.MarketID, p.Version, p.TS, count[p.MarketID] > 1
		m := modes[p.MarketID]
		if len(m) != len(Venues) {
			m = "nnnn"
		}
		ms[i] = m
		for venue, q := range p.Quotes {
			v := VenueIndex(venue)
			if v < 0 {
				continue
			}
			present[i] |= int32(presentBit(v))
			bid, ask := q.Bid, q.Ask
			if m[v] == 'i' {
				bid, ask = complement(q.Ask), complement(q.Bid)
			}
			sides[2+2*v][i], sides[3+2*v][i] = bid, ask
			if m[v] != 'x' {
				sides[0][i], sides[1][i] = maxOf(sides[0][i], bid), minOf(sides[1][i], ask)
			}
		}
	}
	args := []any{ids, versions, ts, multi, present, ms}
	for _, s := range sides {
		args = append(args, s)
	}
	return args
}

// complement is 1 − p, nil for nil.
func complement(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := 1 - *p
	return &v
}

// tradeArgs are the batch statement's trade parameters: the trades in
// trade_id order (the order the insert locks them in), each with its venue's
// position, then the trades' markets with their cached stamps and modes.
func (s *Store) tradeArgs(trades []Trade) []any {
	n := len(trades)
	ids, markets, venues, sides := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	prices, sizes, ts := make([]float64, n), make([]float64, n), make([]time.Time, n)
	vi := make([]int32, n)
	for i, t := range trades {
		ids[i], markets[i], venues[i], sides[i] = t.TradeID, t.MarketID, t.Venue, t.Side
		prices[i], sizes[i], ts[i] = t.Price, t.Size, t.TS
		vi[i] = int32(VenueIndex(t.Venue) + 1)
	}
	tm := slices.Clone(markets)
	slices.Sort(tm)
	tm = slices.Compact(tm)
	stamps, modes := make([]int64, len(tm)), make([]string, len(tm))
	for i, e := range s.deps.get(tm) {
		stamps[i], modes[i] = e.deps, candleModes(e.market)
	}
	return []any{ids, markets, venues, prices, sizes, sides, ts, vi, tm, stamps, modes}
}

// readBatchTradesSQL reads back the batch's trades as stored, and which of
// them this transaction inserted (their row's xmin is its id): the others
// were stored before, so they are not applied and count in no candle.
const readBatchTradesSQL = `
	SELECT trade_id, market_id, venue, price, size, side, ts,
	       xmin = pg_current_xact_id()::xid
	FROM trades
	WHERE trade_id = ANY($1)
	ORDER BY trade_id`

// collectBatchTrades reads readBatchTradesSQL's rows and marks the trades
// inserted now as applied.
func collectBatchTrades(rows pgx.Rows, applied map[string]bool) ([]Trade, error) {
	var out []Trade
	var t Trade
	var inserted bool
	_, err := pgx.ForEachRow(rows, []any{&t.TradeID, &t.MarketID, &t.Venue, &t.Price, &t.Size, &t.Side, &t.TS, &inserted}, func() error {
		t.TS = t.TS.UTC()
		out = append(out, t)
		if inserted {
			applied["trade:"+t.TradeID] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read back trades: %w", err)
	}
	return out, nil
}

// writePricesTrades runs the batch statement in tx (the general path) and
// records what it applied.
func (s *Store) writePricesTrades(ctx context.Context, tx pgx.Tx, b *Batch, res *Result) error {
	if len(b.Prices) == 0 && len(b.Trades) == 0 {
		return nil
	}
	args, cached, err := s.batchArgs(b)
	if err != nil {
		return err
	}
	rows, err := tx.Query(ctx, s.statement(b), args...)
	if err != nil {
		return fmt.Errorf("store: write %d prices and %d trades: %w", len(b.Prices), len(b.Trades), err)
	}
	if len(b.Prices) > 0 {
		// The documents are read again with the batch's other changes.
		if _, err := s.scanPriceDocs(rows, b.Prices, cached, res.Applied); err != nil {
			return err
		}
	} else {
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("store: write %d trades: %w", len(b.Trades), err)
		}
	}
	if len(b.Trades) == 0 {
		return nil
	}
	rows, err = tx.Query(ctx, readBatchTradesSQL, s.tradeIDsArg(args))
	if err != nil {
		return fmt.Errorf("store: read back trades: %w", err)
	}
	res.Trades, err = collectBatchTrades(rows, res.Applied)
	return err
}

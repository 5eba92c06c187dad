package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TradesByID reads the stored trades with the given ids (absent ones are
// left out), ascending by id.
func (s *Store) TradesByID(ctx context.Context, ids []string) ([]Trade, error) {
	return readTradeIDs(ctx, s.pool, ids)
}

func readTradeIDs(ctx context.Context, db DB, ids []string) ([]Trade, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, `
		SELECT trade_id, market_id, venue, price, size, side, ts
		FROM trades
		WHERE trade_id = ANY($1)
		ORDER BY trade_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: read back trades: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Trade, error) {
		var t Trade
		err := r.Scan(&t.TradeID, &t.MarketID, &t.Venue, &t.Price, &t.Size, &t.Side, &t.TS)
		t.TS = t.TS.UTC()
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read back trades: %w", err)
	}
	return out, nil
}

package cache

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Trades returns a market's newest trades, newest first, at most limit.
// A market unknown to Redis and the store is ErrNotFound, one outside the
// served set ErrNotServed. Trade lists are not held in node memory; the
// answer "unknown" or "not served" held for the market's price item is.
func (r *Reader) Trades(ctx context.Context, id string, limit int) ([][]byte, error) {
	epoch := r.g.now()
	if it, ok := r.prices.get(id); ok && !it.Served {
		v := r.roundTrip(ctx, nil)
		if it, ok = stillHeld(r, v, epoch, it, func() (PriceItem, bool) { return r.prices.get(id) }); ok && !it.Served {
			r.count(resTrades, layerMemory, 1)
			if !it.Found {
				return nil, ErrNotFound
			}
			return nil, ErrNotServed
		}
	}
	var mcmd *redis.SliceCmd
	var tcmd *redis.StringSliceCmd
	var icmd *redis.StringCmd
	var okcmd *redis.IntCmd
	v := r.roundTrip(ctx, func(p redis.Pipeliner) {
		mcmd = r.cache.QueueMarket(p, id)
		tcmd = r.cache.QueueTrades(p, id, limit)
		icmd = r.cache.QueueInverted(p, id)
		okcmd = r.cache.QueueComplete(p)
	})
	// unanswered: Redis did not answer (not worth a repair), as opposed to
	// answering without the data.
	err, unanswered := v.redisErr, v.redisErr != nil
	var m MarketEntry
	if err == nil {
		m, err = ParseMarket(mcmd)
		unanswered = err != nil
	}
	// After Redis lost its data, the price item may be back before the
	// trade list (see QueueComplete): read the trades from the store until
	// the listing is rebuilt.
	if err == nil {
		if complete, cerr := okcmd.Result(); cerr != nil || complete != 1 {
			unanswered = cerr != nil
			err = errors.Join(cerr, ErrListingIncomplete)
		}
	}
	if err == nil && m.Found {
		if !m.Served {
			r.count(resTrades, layerRedis, 1)
			return nil, ErrNotServed
		}
		vals, terr := tcmd.Result()
		inverted, ierr := ParseInverted(icmd)
		if terr == nil && ierr == nil {
			items := make([][]byte, len(vals))
			for i, s := range vals {
				items[i] = []byte(s)
			}
			r.count(resTrades, layerRedis, 1)
			return invertTrades(items, inverted), nil
		}
		err, unanswered = errors.Join(terr, ierr), true
	}
	docs, serr := r.store.MarketDocsByID(ctx, []string{id})
	if serr != nil {
		return nil, unavailable(err, serr)
	}
	d := docs[0]
	if !r.rules.MarketServed(d) {
		r.count(resTrades, layerStore, 1)
		if d.Rev == 0 {
			if err == nil && v.keep {
				// Unknown to Redis and to the store (see Prices).
				r.prices.put(strings.Clone(id), PriceItem{}, epoch)
			}
			return nil, ErrNotFound
		}
		return nil, ErrNotServed
	}
	trades, serr := r.store.NewestTrades(ctx, id, MaxTrades)
	if serr != nil {
		return nil, unavailable(err, serr)
	}
	r.count(resTrades, layerStore, 1)
	items := make([][]byte, 0, min(limit, len(trades)))
	for i := range trades[:min(limit, len(trades))] {
		t := &trades[i]
		items = append(items, renderTradeAs(t, tradeInverted(d.Market, t.Venue)))
	}
	if !unanswered {
		r.repair(nil, docs, trades)
	}
	return items, nil
}

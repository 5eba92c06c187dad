package cache

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/store"
)

// PriceItem is one market's answer in a price snapshot.
type PriceItem struct {
	// Found: Redis or the store knows the market. Node memory holds an
	// item that is not Found as the answer "unknown" (a negative answer).
	Found bool
	// Served: the market is in the served set.
	Served bool
	// Body is the wire JSON of its price item; nil until a price arrives.
	Body []byte
}

// Shown reports whether the item is in the snapshot's data (else its id is
// in missing).
func (p PriceItem) Shown() bool { return p.Served && p.Body != nil }

// Prices returns the price items of ids, in order: a poll of 50 ids whose
// items the node holds costs Redis one shared read of the change number.
func (r *Reader) Prices(ctx context.Context, ids []string) ([]PriceItem, error) {
	items := make([]PriceItem, len(ids))
	epoch := r.g.now()
	var held, miss []int
	for i, id := range ids {
		if it, ok := r.prices.get(id); ok {
			items[i], held = it, append(held, i)
		} else {
			miss = append(miss, i)
		}
	}
	cmds := make([]*redis.SliceCmd, len(ids))
	queue := func(idx []int) func(redis.Pipeliner) {
		if len(idx) == 0 {
			return nil
		}
		return func(p redis.Pipeliner) {
			for _, i := range idx {
				cmds[i] = r.cache.QueueMarket(p, ids[i])
			}
		}
	}
	v := r.roundTrip(ctx, queue(miss))
	// fromRedis are the indexes whose commands Redis answered, toStore
	// those the store answers.
	var fromRedis, toStore []int
	redisErr := v.redisErr
	if redisErr != nil {
		toStore = miss // memory's answers stand: degraded
	} else {
		fromRedis = miss
		again := r.recheck(v, epoch, held, func(i int) bool {
			it, ok := r.prices.get(ids[i])
			items[i] = it
			return ok
		})
		if len(again) > 0 {
			if _, _, err := r.trips.do(ctx, queue(again)); err != nil {
				redisErr, toStore = err, append(toStore, again...)
			} else {
				fromRedis = append(fromRedis, again...)
			}
			held = without(held, again)
		}
	}
	r.count(resPrices, layerMemory, len(held))

	// absent are the ids Redis answered as missing: only they are
	// repaired, and only they may be held as unknown.
	absent := map[string]bool{}
	answered := 0
	for _, i := range fromRedis {
		e, err := ParseMarket(cmds[i])
		switch {
		case err != nil:
			redisErr, toStore = err, append(toStore, i)
		case !e.Found:
			absent[ids[i]], toStore = true, append(toStore, i)
		default:
			answered++
			items[i] = PriceItem{Found: true, Served: e.Served, Body: e.Body}
			if v.keep {
				// A key of its own: id may be a slice of a whole query.
				r.prices.put(strings.Clone(ids[i]), items[i], epoch)
			}
		}
	}
	r.count(resPrices, layerRedis, answered)
	if len(toStore) == 0 {
		return items, nil
	}
	want := make([]string, len(toStore))
	for j, i := range toStore {
		want[j] = ids[i]
	}
	docs, err := r.store.MarketDocsByID(ctx, want)
	if err != nil {
		return nil, unavailable(redisErr, err)
	}
	r.count(resPrices, layerStore, len(toStore))
	byID := make(map[string]PriceItem, len(docs))
	var repair []store.MarketDoc
	for _, d := range docs {
		m := r.rules.RenderMarket(d)
		byID[d.ID] = PriceItem{Found: d.Rev > 0, Served: m.Served, Body: m.Body}
		switch {
		case d.Rev > 0 && absent[d.ID]:
			repair = append(repair, d)
		case d.Rev == 0 && absent[d.ID] && v.keep:
			// Unknown to Redis and to the store: held, so that polling a
			// bad id does not cost Postgres a query per request.
			r.prices.put(strings.Clone(d.ID), PriceItem{}, epoch)
		}
	}
	for _, i := range toStore {
		items[i] = byID[ids[i]]
	}
	r.repair(nil, repair, nil)
	return items, nil
}

// without returns a without the values in b (both small).
func without(a, b []int) []int {
	out := a[:0:0]
	for _, x := range a {
		keep := true
		for _, y := range b {
			if x == y {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, x)
		}
	}
	return out
}

package cache

import (
	"context"
	"strings"

	"github.com/cespare/xxhash/v2"

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
	// Rev is the market's revision in the store (every change of the
	// market or its price raises it): streams order a market's messages by
	// it. 0 when the market is unknown.
	Rev int64
	// Seq is the change number of the write that stored the item in Redis
	// (0: unknown, or read from the store): the position a snapshot's ETag
	// names.
	Seq int64
	// Sum is xxhash of Body when the replica kept it with the item (0:
	// not known; BodySum computes it).
	Sum uint64
}

// BodySum is xxhash of the item's Body (0 without one), from Sum when the
// replica kept it.
func (p PriceItem) BodySum() uint64 {
	if p.Sum != 0 || p.Body == nil {
		return p.Sum
	}
	return xxhash.Sum64(p.Body)
}

// Shown reports whether the item is in the snapshot's data (else its id is
// in missing).
func (p PriceItem) Shown() bool { return p.Served && p.Body != nil }

// Prices returns the price items of ids, in order: from the node's replica
// when it holds them (no round trip), else from node memory, Redis or the
// store.
func (r *Reader) Prices(ctx context.Context, ids []string) ([]PriceItem, error) {
	return r.BeginPrices(ctx, ids, 0).Finish(ctx)
}

// PricesRead is a price read begun (BeginPrices) and not yet finished: its
// node memory lookups are done and its Redis round trip is on its way.
type PricesRead struct {
	r          *Reader
	ids        []string
	items      []PriceItem
	epoch      uint64
	held, miss []int
	cmds       []*redis.SliceCmd
	queue      func([]int) func(redis.Pipeliner)
	tr         *trip
	beginErr   error
}

// BeginPrices starts Prices: it looks ids up in node memory and queues the
// round trip (the change number and the misses), and returns without
// waiting for Redis, so that the caller can run its admission meanwhile.
// Finish completes it; a caller that will not finish (the request was
// refused) calls Discard. Only Finish reads the store: a refused request
// never costs Postgres anything.
//
// pos is the position the client last saw (its ETag: every item it was
// shown was written at a change number at most pos), 0 when none: the read
// never shows an older item than that client saw. The replica answers only
// once it has applied every notice up to pos (waiting up to OrderWait for
// it); otherwise the read goes to Redis, which is never behind any node.
func (r *Reader) BeginPrices(ctx context.Context, ids []string, pos int64) *PricesRead {
	p := &PricesRead{r: r, ids: ids, items: make([]PriceItem, len(ids)), epoch: r.g.now()}
	rep := r.replicaFor(ctx, pos)
	replicated := 0
	if rep != nil {
		rep.getMany(ids, func(i int, it replicaItem) {
			p.items[i] = PriceItem{Found: true, Served: it.served, Body: it.body, Rev: it.rev, Seq: it.seq, Sum: it.sum}
			replicated++
		})
	}
	for i, id := range ids {
		if p.items[i].Found {
			continue // from the replica
		}
		if it, ok := r.prices.get(id); ok {
			p.items[i], p.held = it, append(p.held, i)
		} else {
			p.miss = append(p.miss, i)
		}
	}
	p.queue = func(idx []int) func(redis.Pipeliner) {
		if len(idx) == 0 {
			return nil
		}
		return func(pl redis.Pipeliner) {
			for _, i := range idx {
				p.cmds[i] = r.cache.QueueMarket(pl, ids[i])
			}
		}
	}
	r.count(resPrices, layerReplica, replicated)
	if len(p.held)+len(p.miss) > 0 {
		p.cmds = make([]*redis.SliceCmd, len(ids)) // what the replica answered needs none
		p.tr, p.beginErr = r.trips.begin(ctx, p.queue(p.miss))
	}
	return p
}

// Discard drops a read that will not be finished; nil is none.
func (p *PricesRead) Discard() {
	if p != nil && p.tr != nil {
		p.r.trips.discard(p.tr)
	}
}

// Finish waits for the read's round trip and completes it: Redis for what
// memory lacked (or could not be trusted for), the store for what Redis
// lacked, then repairs.
func (p *PricesRead) Finish(ctx context.Context) ([]PriceItem, error) {
	r, ids, items, epoch, cmds, queue := p.r, p.ids, p.items, p.epoch, p.cmds, p.queue
	held, miss := p.held, p.miss
	if len(held)+len(miss) == 0 {
		return items, nil // all from the replica
	}
	var v verdict
	if p.beginErr != nil {
		v = r.verdictOf(ctx, 0, nil, p.beginErr)
	} else {
		seq, seqErr, err := r.trips.wait(ctx, p.tr)
		v = r.verdictOf(ctx, seq, seqErr, err)
	}
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
			items[i] = PriceItem{Found: true, Served: e.Served, Body: e.Body, Rev: e.Rev, Seq: e.Seq}
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
		byID[d.ID] = PriceItem{Found: d.Rev > 0, Served: m.Served, Body: m.Body, Rev: d.Rev}
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

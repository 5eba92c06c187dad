package cache

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/store"
)

// rebuildPipeline is how many documents one rebuild pipeline carries.
const rebuildPipeline = 500

// RebuildStats counts what a rebuild wrote and pruned.
type RebuildStats struct {
	Events, Markets, TradeLists, Pruned int
}

// Rebuild rewrites every document from a store snapshot, then deletes what the
// snapshot does not hold. Writes use the stored revisions and replace equal
// ones, so the result is byte for byte what ingest built, and a concurrent
// ingest commit (with a higher revision) still wins.
func (c *Cache) Rebuild(ctx context.Context, snap *store.Snapshot) (RebuildStats, error) {
	var st RebuildStats
	keep := map[string]bool{}
	listed := map[string]bool{}
	var pending []func(redis.Pipeliner)
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := c.exec(ctx, func(p redis.Pipeliner) {
			for _, q := range pending {
				q(p)
			}
		})
		pending = pending[:0]
		return err
	}
	add := func(q func(redis.Pipeliner)) error {
		pending = append(pending, q)
		if len(pending) >= rebuildPipeline {
			return flush()
		}
		return nil
	}

	err := snap.EventDocs(ctx, 1000, func(d store.EventDoc) error {
		doc := c.rules.RenderEvent(d)
		st.Events++
		keep[c.EventKey(d.ID)] = true
		listed[d.ID] = true
		return add(func(p redis.Pipeliner) { c.queueEvent(ctx, p, doc, true) })
	})
	if err != nil {
		return st, err
	}
	err = snap.MarketDocs(ctx, func(d store.MarketDoc) error {
		doc := c.rules.RenderMarket(d)
		st.Markets++
		keep[c.MarketKey(d.ID)] = true
		return add(func(p redis.Pipeliner) { c.queueMarket(ctx, p, doc, true) })
	})
	if err != nil {
		return st, err
	}
	err = snap.Trades(ctx, MaxTrades, func(market string, trades []store.Trade) error {
		st.TradeLists++
		key := c.TradesKey(market)
		keep[key] = true
		return add(func(p redis.Pipeliner) {
			p.Del(ctx, key)
			c.queueTrades(ctx, p, trades)
		})
	})
	if err != nil {
		return st, err
	}
	if err := flush(); err != nil {
		return st, err
	}
	n, err := c.prune(ctx, keep, listed)
	st.Pruned = n
	return st, err
}

// prune deletes document keys and listing entries that the store no longer
// has (say, a cache that was filled from another database).
func (c *Cache) prune(ctx context.Context, keep, listed map[string]bool) (int, error) {
	pruned := 0
	listing := map[string]bool{c.listingKey("g"): true, c.listingKey("s"): true, c.listingKey("k"): true}
	err := c.forEachKey(ctx, c.prefix+"{[em]:*", func(key string) error {
		if keep[key] {
			return nil
		}
		pruned++
		return c.rdb.Unlink(ctx, key).Err()
	})
	if err != nil {
		return pruned, fmt.Errorf("cache: prune documents: %w", err)
	}
	for h := range listing {
		var stale []string
		iter := c.rdb.HScan(ctx, h, 0, "", 1000).Iterator()
		for i := 0; iter.Next(ctx); i++ {
			if i%2 == 0 && !listed[iter.Val()] {
				stale = append(stale, iter.Val())
			}
		}
		if err := iter.Err(); err != nil {
			return pruned, fmt.Errorf("cache: prune listing: %w", err)
		}
		if len(stale) > 0 {
			pruned += len(stale)
			if err := c.rdb.HDel(ctx, h, stale...).Err(); err != nil {
				return pruned, fmt.Errorf("cache: prune listing: %w", err)
			}
		}
	}
	// Listing sets hold only ids that putListing placed there; an id pruned
	// above may still sit in a set, so drop sets' members that are not listed.
	err = c.forEachKey(ctx, c.listingKey("f:*"), func(key string) error {
		var stale []any
		iter := c.rdb.ZScan(ctx, key, 0, "", 1000).Iterator()
		for i := 0; iter.Next(ctx); i++ {
			if i%2 == 0 && !listed[iter.Val()] {
				stale = append(stale, iter.Val())
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if len(stale) > 0 {
			pruned += len(stale)
			return c.rdb.ZRem(ctx, key, stale...).Err()
		}
		return nil
	})
	if err != nil {
		return pruned, fmt.Errorf("cache: prune listing sets: %w", err)
	}
	return pruned, nil
}

// forEachKey scans keys matching pattern on every server (all masters of a
// cluster).
func (c *Cache) forEachKey(ctx context.Context, pattern string, fn func(string) error) error {
	scan := func(ctx context.Context, client *redis.Client) error {
		iter := client.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			if err := fn(iter.Val()); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	switch r := c.rdb.(type) {
	case *redis.ClusterClient:
		return r.ForEachMaster(ctx, scan)
	case *redis.Client:
		return scan(ctx, r)
	default:
		return fmt.Errorf("cache: cannot scan keys on %T", c.rdb)
	}
}

package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/store"
)

// rebuildPipeline is how many documents one rebuild pipeline carries.
const rebuildPipeline = 500

// RebuildStats counts what a rebuild wrote and pruned.
type RebuildStats struct {
	Events, Markets, TradeLists, Pruned int
	// Renumbered counts document revisions advanced because Redis held
	// higher ones than Postgres (after Postgres was restored or recreated).
	Renumbered int
}

// Source is what a rebuild reads: a consistent snapshot, and the current
// stored form of trades (to tell a trade ingest added during the rebuild from
// junk in a trade list).
type Source interface {
	Snapshot(ctx context.Context) (*store.Snapshot, error)
	TradesByID(ctx context.Context, ids []string) ([]store.Trade, error)
	AdvanceRevisions(ctx context.Context, floor int64) (int, error)
}

var _ Source = (*store.Store)(nil)

// Rebuild rewrites every document from a store snapshot, then deletes what the
// snapshot does not hold. Writes use the stored revisions and replace equal
// ones, so the result is byte for byte what ingest built. It is safe while
// ingest runs: a commit after the snapshot carries a higher revision and wins,
// and only keys and listing entries that existed before the snapshot was taken
// can be pruned, so nothing ingest writes meanwhile is deleted.
//
// When Redis holds revisions above the store's (Postgres was restored from a
// backup or recreated), the store's revisions are first advanced past them
// and the rebuild runs again, so that it and later ingest writes win.
func (c *Cache) Rebuild(ctx context.Context, src Source) (RebuildStats, error) {
	st, ahead, floor, err := c.rebuild(ctx, src)
	if err != nil {
		return st, err
	}
	if !ahead {
		return st, c.markComplete(ctx)
	}
	n, err := src.AdvanceRevisions(ctx, floor)
	if err != nil {
		return st, err
	}
	st2, _, _, err := c.rebuild(ctx, src)
	st2.Renumbered = n
	st2.Pruned += st.Pruned
	if err == nil {
		err = c.markComplete(ctx)
	}
	return st2, err
}

// rebuild is one pass; ahead reports documents whose Redis revision is above
// the store's, which the pass could not replace, and floor the highest
// revision Redis holds.
func (c *Cache) rebuild(ctx context.Context, src Source) (st RebuildStats, ahead bool, floor int64, err error) {
	before, err := c.existing(ctx)
	if err != nil {
		return st, false, 0, err
	}
	snap, err := src.Snapshot(ctx)
	if err != nil {
		return st, false, 0, err
	}
	defer snap.Close(ctx) //nolint:errcheck // read-only
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

	err = snap.EventDocs(ctx, 1000, func(d store.EventDoc) error {
		doc := c.rules.RenderEvent(d)
		st.Events++
		if before.revs[c.EventKey(d.ID)] > d.Rev || before.listingRevs[d.ID] > d.Rev {
			ahead = true
		}
		keep[c.EventKey(d.ID)] = true
		listed[d.ID] = true
		return add(func(p redis.Pipeliner) { c.queueEvent(ctx, p, doc, true) })
	})
	if err != nil {
		return st, false, 0, err
	}
	err = snap.MarketDocs(ctx, func(d store.MarketDoc) error {
		doc := c.rules.RenderMarket(d)
		st.Markets++
		if before.revs[c.MarketKey(d.ID)] > d.Rev {
			ahead = true
		}
		keep[c.MarketKey(d.ID)] = true
		return add(func(p redis.Pipeliner) { c.queueMarket(ctx, p, doc, 0, true) })
	})
	if err != nil {
		return st, false, 0, err
	}
	rendered := map[string]map[string]bool{} // trade list key → members from the snapshot
	err = snap.Trades(ctx, MaxTrades, func(market string, trades []store.Trade) error {
		st.TradeLists++
		key := c.TradesKey(market)
		keep[key] = true
		members := make(map[string]bool, len(trades))
		for i := range trades {
			members[string(RenderTrade(&trades[i]))] = true
		}
		rendered[key] = members
		// No DEL first: a trade ingest adds meanwhile must stay. The list
		// keeps the newest MaxTrades of what it holds, as ingest's writes do.
		return add(func(p redis.Pipeliner) { c.queueTrades(ctx, p, trades) })
	})
	if err != nil {
		return st, false, 0, err
	}
	if err := flush(); err != nil {
		return st, false, 0, err
	}
	n, err := c.pruneTrades(ctx, src, rendered)
	st.Pruned += n
	if err != nil {
		return st, false, 0, err
	}
	n, err = c.prune(ctx, before, keep, listed)
	st.Pruned += n
	return st, ahead, before.maxRev, err
}

// pruneTrades removes trade list members that are not the stored form of a
// stored trade. Members beyond the snapshot's are checked against the store's
// current state, so a trade ingest committed during the rebuild stays.
func (c *Cache) pruneTrades(ctx context.Context, src Source, rendered map[string]map[string]bool) (int, error) {
	keys := make([]string, 0, len(rendered))
	for k := range rendered {
		keys = append(keys, k)
	}
	pruned := 0
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), rebuildPipeline)]
		keys = keys[len(chunk):]
		p := c.rdb.Pipeline()
		cmds := make([]*redis.StringSliceCmd, len(chunk))
		for i, k := range chunk {
			cmds[i] = p.ZRange(ctx, k, 0, -1)
		}
		if _, err := p.Exec(ctx); err != nil {
			return pruned, fmt.Errorf("cache: read trade lists: %w", err)
		}
		for i, k := range chunk {
			var extra []string
			var ids []string
			for _, m := range cmds[i].Val() {
				if rendered[k][m] {
					continue
				}
				extra = append(extra, m)
				var t struct {
					TradeID string `json:"trade_id"`
				}
				if json.Unmarshal([]byte(m), &t) == nil && t.TradeID != "" {
					ids = append(ids, t.TradeID)
				}
			}
			if len(extra) == 0 {
				continue
			}
			current, err := src.TradesByID(ctx, ids)
			if err != nil {
				return pruned, err
			}
			valid := map[string]bool{}
			for j := range current {
				valid[string(RenderTrade(&current[j]))] = true
			}
			var junk []any
			for _, m := range extra {
				if !valid[m] {
					junk = append(junk, m)
				}
			}
			if len(junk) > 0 {
				pruned += len(junk)
				if err := c.rdb.ZRem(ctx, k, junk...).Err(); err != nil {
					return pruned, fmt.Errorf("cache: prune trade list %s: %w", k, err)
				}
			}
		}
	}
	return pruned, nil
}

// present is what the cache held before a rebuild's snapshot.
type present struct {
	keys    []string
	listing map[string][]string // listing hash or set key → its fields or members
	// revs are the revisions of document keys and of listing entries (by
	// event id); maxRev is the highest of them.
	revs, listingRevs map[string]int64
	maxRev            int64
}

// existing lists document keys and listing entries under the prefix.
func (c *Cache) existing(ctx context.Context) (present, error) {
	p := present{listing: map[string][]string{}, revs: map[string]int64{}, listingRevs: map[string]int64{}}
	err := redisx.ScanKeys(ctx, c.rdb, c.prefix+"{[em]:*", func(key string) error {
		p.keys = append(p.keys, key)
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("cache: list documents: %w", err)
	}
	if err := c.readRevs(ctx, &p); err != nil {
		return p, err
	}
	for _, h := range []string{c.listingKey("g"), c.listingKey("s"), c.listingKey("k"), c.listingKey("m")} {
		fields, err := c.rdb.HKeys(ctx, h).Result()
		if err == nil && h == c.listingKey("g") {
			// The volume ranking holds the same ids as the summaries.
			var vol []string
			vol, err = c.rdb.ZRange(ctx, c.listingKey("v"), 0, -1).Result()
			p.listing[c.listingKey("v")] = vol
		}
		if err != nil {
			return p, fmt.Errorf("cache: list listing: %w", err)
		}
		p.listing[h] = fields
	}
	err = redisx.ScanKeys(ctx, c.rdb, c.listingKey("f:*"), func(key string) error {
		members, err := c.rdb.ZRange(ctx, key, 0, -1).Result()
		p.listing[key] = members
		return err
	})
	if err != nil {
		return p, fmt.Errorf("cache: list listing sets: %w", err)
	}
	return p, nil
}

// readRevs reads the revision of every document and listing entry.
func (c *Cache) readRevs(ctx context.Context, p *present) error {
	var docs []string
	for _, k := range p.keys {
		if !strings.HasSuffix(k, ":t") {
			docs = append(docs, k)
		}
	}
	for len(docs) > 0 {
		chunk := docs[:min(len(docs), rebuildPipeline)]
		docs = docs[len(chunk):]
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, len(chunk))
		for i, k := range chunk {
			cmds[i] = pipe.HGet(ctx, k, "g")
		}
		// A key of the wrong type (junk) has no revision; prune removes it.
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "WRONGTYPE") {
			return fmt.Errorf("cache: read revisions: %w", err)
		}
		for i, cmd := range cmds {
			if g, err := cmd.Int64(); err == nil {
				p.revs[chunk[i]] = g
				p.maxRev = max(p.maxRev, g)
			}
		}
	}
	revs, err := c.rdb.HGetAll(ctx, c.listingKey("g")).Result()
	if err != nil {
		return fmt.Errorf("cache: read listing revisions: %w", err)
	}
	for id, v := range revs {
		if g, err := strconv.ParseInt(v, 10, 64); err == nil {
			p.listingRevs[id] = g
			p.maxRev = max(p.maxRev, g)
		}
	}
	return nil
}

// prune deletes document keys and listing entries that existed before the
// snapshot and that the snapshot does not hold (say, a cache that was filled
// from another database).
func (c *Cache) prune(ctx context.Context, before present, keep, listed map[string]bool) (int, error) {
	pruned := 0
	for _, key := range before.keys {
		if keep[key] {
			continue
		}
		pruned++
		if err := c.rdb.Unlink(ctx, key).Err(); err != nil {
			return pruned, fmt.Errorf("cache: prune documents: %w", err)
		}
	}
	for key, ids := range before.listing {
		var stale []string
		for _, id := range ids {
			if !listed[id] {
				stale = append(stale, id)
			}
		}
		if len(stale) == 0 {
			continue
		}
		pruned += len(stale)
		var err error
		if key == c.listingKey("g") || key == c.listingKey("s") || key == c.listingKey("k") || key == c.listingKey("m") {
			err = c.rdb.HDel(ctx, key, stale...).Err()
		} else {
			members := make([]any, len(stale))
			for i, m := range stale {
				members[i] = m
			}
			err = c.rdb.ZRem(ctx, key, members...).Err()
		}
		if err != nil {
			return pruned, fmt.Errorf("cache: prune listing: %w", err)
		}
	}
	return pruned, nil
}

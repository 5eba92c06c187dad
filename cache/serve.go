package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// The reads the Reader queues on its shared round trips (trips.go), and
// their parsing.

// QueueEvent queues the read of an event's document.
func (c *Cache) QueueEvent(p redis.Pipeliner, id string) *redis.SliceCmd {
	return p.HMGet(context.Background(), c.EventKey(id), "g", "b", "m")
}

// errNotRead means a queued read has no answer: the round trip meant to
// carry it did not run. Callers read the store, as for any failed read.
var errNotRead = errors.New("cache: the queued read was not sent")

// ParseEvent reads a queued event document.
func ParseEvent(cmd *redis.SliceCmd) (EventEntry, error) {
	vals, err := cmd.Result()
	if err != nil {
		return EventEntry{}, err
	}
	if len(vals) != 3 {
		return EventEntry{}, errNotRead
	}
	var e EventEntry
	if g, ok := vals[0].(string); ok {
		e.Found = true
		e.Rev, _ = strconv.ParseInt(g, 10, 64)
	}
	if b, ok := vals[1].(string); ok {
		e.Body = []byte(b)
	}
	if m, ok := vals[2].(string); ok {
		e.MergedInto = m
	}
	return e, nil
}

// QueueMarket queues the read of a market's price item and served flag.
func (c *Cache) QueueMarket(p redis.Pipeliner, id string) *redis.SliceCmd {
	return p.HMGet(context.Background(), c.MarketKey(id), "g", "s", "b", "q")
}

// ParseMarket reads a queued price item.
func ParseMarket(cmd *redis.SliceCmd) (MarketEntry, error) {
	vals, err := cmd.Result()
	if err != nil {
		return MarketEntry{}, err
	}
	if len(vals) != 4 {
		return MarketEntry{}, errNotRead
	}
	return marketEntry(vals), nil
}

// marketEntry reads the values of HMGET g s b q.
func marketEntry(vals []any) MarketEntry {
	var m MarketEntry
	if g, ok := vals[0].(string); ok {
		m.Found = true
		m.Rev, _ = strconv.ParseInt(g, 10, 64)
	}
	m.Served = vals[1] == "1"
	if b, ok := vals[2].(string); ok {
		m.Body = []byte(b)
	}
	if q, ok := vals[3].(string); ok {
		m.Seq, _ = strconv.ParseInt(q, 10, 64)
	}
	return m
}

// QueueInverted queues the read of the venues whose trades a market shows
// inverted (MarketDocument.Inverted).
func (c *Cache) QueueInverted(p redis.Pipeliner, id string) *redis.StringCmd {
	return p.HGet(context.Background(), c.MarketKey(id), "i")
}

// ParseInverted reads a queued QueueInverted: "" when no venue is inverted.
func ParseInverted(cmd *redis.StringCmd) (string, error) {
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// QueueTrades queues the read of a market's newest trades, newest first.
func (c *Cache) QueueTrades(p redis.Pipeliner, id string, limit int) *redis.StringSliceCmd {
	return p.ZRevRange(context.Background(), c.TradesKey(id), 0, int64(limit-1))
}

// listPage reads one page of a listing set and its summaries, in one script
// on the {i} slot. KEYS: the set, {i}:s, {i}:ok. ARGV: the ZRANGE BYLEX
// start ("-" or "(<id>"), the count. Returns {0} when the listing is not
// known to be complete (Redis was flushed and not yet rebuilt), else
// {1, id, summary, id, summary, ...}.
var listPage = redis.NewScript(`
if redis.call('EXISTS', KEYS[3]) == 0 then return {0} end
local ids = redis.call('ZRANGE', KEYS[1], ARGV[1], '+', 'BYLEX', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {1}
if #ids == 0 then return out end
local sums = redis.call('HMGET', KEYS[2], unpack(ids))
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = sums[i] or ''
end
return out
`)

// QueueListPage queues the read of up to count listed events of a set with
// ids above after (bytewise), ascending. An id whose summary is gone (a
// rebuild pruning it at that moment) comes back with a nil summary: it still
// counts for paging, so a page never ends a walk early.
func (c *Cache) QueueListPage(p redis.Pipeliner, set, after string, count int) *redis.Cmd {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	return listPage.EvalSha(context.Background(), p,
		[]string{c.SetKey(set), c.listingKey("s"), c.listingKey("ok")}, start, count)
}

// QueueComplete queues the check that Redis holds the whole listing (see
// ListingComplete). Until a rebuild has run since Redis lost its data, a
// market's price item may be back (repaired by a read, or rewritten by
// ingest) while its trade list is not, or holds only the trades added since:
// a trade list is only trusted while the listing is complete.
func (c *Cache) QueueComplete(p redis.Pipeliner) *redis.IntCmd {
	return p.Exists(context.Background(), c.listingKey("ok"))
}

// ErrListingIncomplete means Redis does not hold the whole listing (it was
// flushed and no rebuild has finished since): read it from the store.
var ErrListingIncomplete = errors.New("cache: the listing is not complete in Redis")

// ParseListPage reads a queued listing page. When the script was lost
// (NOSCRIPT), it runs it again directly.
func (c *Cache) ParseListPage(ctx context.Context, cmd *redis.Cmd, set, after string, count int) (ids []string, summaries [][]byte, err error) {
	vals, err := cmd.Slice()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		start := "-"
		if after != "" {
			start = "(" + after
		}
		vals, err = listPage.Run(ctx, c.rdb, []string{c.SetKey(set), c.listingKey("s"), c.listingKey("ok")}, start, count).Slice()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cache: list %s: %w", set, err)
	}
	if len(vals) == 0 || vals[0] != int64(1) {
		return nil, nil, ErrListingIncomplete
	}
	ids, summaries = pagePairs(vals[1:])
	return ids, summaries, nil
}

// ListingComplete reports whether Redis holds the whole listing.
func (c *Cache) ListingComplete(ctx context.Context) (bool, error) {
	n, err := c.rdb.Exists(ctx, c.listingKey("ok")).Result()
	return n == 1, err
}

// markComplete records that the listing is whole (after a rebuild), in the
// current layout (listingLayout).
func (c *Cache) markComplete(ctx context.Context) error {
	return c.rdb.Set(ctx, c.listingKey("ok"), listingLayout, 0).Err()
}

// EnsureComplete rebuilds the cache from src when Redis does not hold the
// whole listing (first start, or Redis lost its data) or holds it in an
// older layout (an upgrade: see listingLayout), under a lock so that one
// ingest worker does it. It reports whether it rebuilt.
func (c *Cache) EnsureComplete(ctx context.Context, src Source) (bool, RebuildStats, error) {
	marker, err := c.rdb.Get(ctx, c.listingKey("ok")).Result()
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	if err != nil || marker == listingLayout {
		return false, RebuildStats{}, err
	}
	lock := c.listingKey("rebuilding")
	got, err := c.rdb.SetNX(ctx, lock, "1", 10*time.Minute).Result()
	if err != nil || !got {
		return false, RebuildStats{}, err
	}
	defer c.rdb.Del(context.WithoutCancel(ctx), lock)
	st, err := c.Rebuild(ctx, src)
	return err == nil, st, err
}

// ApplyDocs writes documents read from the store to repair what Redis lost.
// The revisions guard them like any ingest write. It returns the change
// number the write took, for the repair's change notice (see Apply).
func (c *Cache) ApplyDocs(ctx context.Context, events []store.EventDoc, markets []store.MarketDoc, trades []store.Trade) (notice.Change, error) {
	return c.Apply(ctx, &store.Result{Events: events, Markets: markets, Trades: trades})
}

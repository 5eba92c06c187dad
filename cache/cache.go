// Package cache keeps wire-ready JSON snapshots in Redis, precomputed at
// ingest so that an API node only fetches and concatenates bytes.
//
// Layout under a prefix P (default "md:"); braces are Redis Cluster hash tags:
//
//	P{e:<event>}        hash  g=revision, b=event read body | m=merged_into
//	P{m:<market>}       hash  g=revision, s="1" when served, b=price item,
//	                          q=the change number of the write (0/absent:
//	                          a rebuild's), i=the venues whose trades are
//	                          shown inverted (absent: none)
//	P{m:<market>}:t     zset  newest ≤200 trades, score = ts in µs, member = trade JSON
//	P{i}:g              hash  event → revision of its listing entry
//	P{i}:s              hash  event → summary JSON (served active events only)
//	P{i}:k              hash  event → the listing sets it is in
//	P{i}:v              zset  listed events by volume: score = -volume, so
//	                          ZRANGE gives volume desc, ties by ascending id
//	P{i}:f:<c>:<v>:<n>  zset  listing set (score 0, member = event id) for
//	                          category c, venue v, min_venues n ("*" = any)
//	P{i}:m              hash  event → what the match filters ask of its
//	                          venue links (linksField), for listed events
//	                          whose every link has metadata
//	P{i}:ok             string  the listing is whole (a rebuild finished);
//	                            its value is the layout (listingLayout)
//	P{i}:lock:<name>    string  a worker's lock (TryLock), with a TTL
//	P{i}:cursor:<name>  string  a position workers share (anti-entropy's walk)
//	P{n}:seq            string  the change number writers take before they
//	                            write (Apply; see seq.go)
//
// Every document write is one Lua script on keys of one hash slot, guarded by
// the revision the store took under the document's row lock: an older write
// that arrives late never replaces a newer one.
package cache

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/store"
)

// DefaultPrefix is the key prefix when none is configured.
const DefaultPrefix = "md:"

// Cache writes and reads the snapshots.
type Cache struct {
	rdb    redis.UniversalClient
	prefix string
	rules  Rules
}

// New returns a cache on rdb whose keys start with prefix.
func New(rdb redis.UniversalClient, prefix string, rules Rules) *Cache {
	return &Cache{rdb: rdb, prefix: prefix, rules: rules}
}

// Rules returns the serving rules the cache renders with.
func (c *Cache) Rules() Rules { return c.rules }

// EventKey is the key of an event's read document.
func (c *Cache) EventKey(id string) string { return c.prefix + "{e:" + id + "}" }

// MarketKey is the key of a market's price item.
func (c *Cache) MarketKey(id string) string { return c.prefix + "{m:" + id + "}" }

// TradesKey is the key of a market's newest trades.
func (c *Cache) TradesKey(id string) string { return c.prefix + "{m:" + id + "}:t" }

func (c *Cache) listingKey(suffix string) string { return c.prefix + "{i}:" + suffix }

// SetKey is the key of a listing set (see SetName).
func (c *Cache) SetKey(name string) string { return c.listingKey("f:" + name) }

// putDoc replaces a document hash when the revision is newer (or equal, with
// force, which rebuilds use to rewrite the same state).
var putDoc = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], 'g') or '0')
local gen = tonumber(ARGV[1])
if gen < cur or (gen == cur and ARGV[2] ~= '1') then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'g', ARGV[1], unpack(ARGV, 3))
return 1
`)

// putListing moves an event between listing sets when the revision is newer.
// KEYS: {i}:g, {i}:s, {i}:k, {i}:v, {i}:m. ARGV: id, gen, force, set key
// prefix, summary ("" = not listed), set names separated by spaces,
// -volume, links ("" = a link without metadata). The set keys are built
// from ARGV[4] and share the {i} hash tag with KEYS, so the script stays in
// one slot (Redis Cluster serves it from one node).
var putListing = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local gen = tonumber(ARGV[2])
if gen < cur or (gen == cur and ARGV[3] ~= '1') then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local old = redis.call('HGET', KEYS[3], ARGV[1])
if old then
  for s in string.gmatch(old, '%S+') do redis.call('ZREM', ARGV[4] .. s, ARGV[1]) end
end
if ARGV[5] == '' then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[5])
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[6])
  redis.call('ZADD', KEYS[4], ARGV[7], ARGV[1])
  for s in string.gmatch(ARGV[6], '%S+') do redis.call('ZADD', ARGV[4] .. s, 0, ARGV[1]) end
  if ARGV[8] == '' then
    redis.call('HDEL', KEYS[5], ARGV[1])
  else
    redis.call('HSET', KEYS[5], ARGV[1], ARGV[8])
  end
end
return 1
`)

var scripts = []*redis.Script{putDoc, putListing}

func (c *Cache) queueEvent(ctx context.Context, p redis.Pipeliner, d EventDocument, force bool) {
	f := forceArg(force)
	args := []any{d.Rev, f}
	switch {
	case d.Body != nil:
		args = append(args, "b", d.Body)
	case d.MergedInto != "":
		args = append(args, "m", d.MergedInto)
	}
	putDoc.EvalSha(ctx, p, []string{c.EventKey(d.ID)}, args...)
	summary := ""
	if d.Summary != nil {
		summary = string(d.Summary)
	}
	putListing.EvalSha(ctx, p,
		[]string{c.listingKey("g"), c.listingKey("s"), c.listingKey("k"), c.listingKey("v"), c.listingKey("m")},
		d.ID, d.Rev, f, c.listingKey("f:"), summary, strings.Join(d.Sets, " "), -d.Volume, d.Links)
}

func (c *Cache) queueMarket(ctx context.Context, p redis.Pipeliner, d MarketDocument, seq int64, force bool) {
	args := []any{d.Rev, forceArg(force)}
	if seq > 0 {
		args = append(args, "q", seq)
	}
	if d.Served {
		args = append(args, "s", "1")
	}
	if d.Body != nil {
		args = append(args, "b", d.Body)
	}
	if d.Inverted != "" {
		args = append(args, "i", d.Inverted)
	}
	putDoc.EvalSha(ctx, p, []string{c.MarketKey(d.ID)}, args...)
}

func (c *Cache) queueTrades(ctx context.Context, p redis.Pipeliner, trades []store.Trade) {
	byMarket := map[string][]redis.Z{}
	for i := range trades {
		t := &trades[i]
		byMarket[t.MarketID] = append(byMarket[t.MarketID], redis.Z{Score: TradeScore(t), Member: RenderTrade(t)})
	}
	for m, zs := range byMarket {
		key := c.TradesKey(m)
		p.ZAdd(ctx, key, zs...)
		p.ZRemRangeByRank(ctx, key, 0, -MaxTrades-1)
	}
}

func forceArg(force bool) string {
	if force {
		return "1"
	}
	return "0"
}

// Apply renders and writes everything a committed batch changed, in one
// pipeline, and returns the change notice the writer must publish once it
// returns. It is safe to repeat: writes are guarded by revision and trades
// are a set.
//
// It first takes a change number (see seq.go): the notice names it, which is
// what lets API nodes know when their memory may answer (Reader), and it is
// stored with each price item (field q) so that every node names the same
// position for the same item (a snapshot's ETag). The notice carries the
// price items as written (notice.Change.Prices): nodes update their replica
// from it without reading Redis. A batch with nothing to write takes no
// number (the notice's Seq is 0 and nothing need be sent). After an error
// the notice is returned too when a number was taken: part of the batch may
// have been written, and the notice closes the number's gap.
func (c *Cache) Apply(ctx context.Context, res *store.Result) (notice.Change, error) {
	if len(res.Events)+len(res.Markets)+len(res.Trades) == 0 {
		return notice.Change{}, nil
	}
	seq, err := c.takeSeq(ctx)
	if err != nil {
		return notice.Change{}, err
	}
	n := notice.Change{Seq: seq}
	markets := make([]MarketDocument, len(res.Markets))
	for i, d := range res.Markets {
		markets[i] = c.rules.RenderMarket(d)
	}
	err = c.exec(ctx, func(p redis.Pipeliner) {
		for _, d := range res.Events {
			c.queueEvent(ctx, p, c.rules.RenderEvent(d), false)
		}
		for _, m := range markets {
			c.queueMarket(ctx, p, m, seq, false)
		}
		c.queueTrades(ctx, p, res.Trades)
	})
	for _, d := range res.Events {
		n.Events = append(n.Events, d.ID)
	}
	if len(markets) > 0 {
		n.Markets = make([]string, len(markets))
		n.Prices = make([]notice.Price, len(markets))
		for i, m := range markets {
			n.Markets[i] = m.ID
			n.Prices[i] = notice.Price{ID: m.ID, Rev: m.Rev, Served: m.Served, Body: m.Body}
		}
	}
	for _, t := range res.Trades {
		n.Trades = append(n.Trades, t.MarketID)
	}
	n.Trades = slices.Compact(slices.Sorted(slices.Values(n.Trades)))
	return n, err
}

// exec runs a pipeline, loading the scripts and running it again when Redis
// has lost them (a restart or SCRIPT FLUSH); the writes are idempotent.
func (c *Cache) exec(ctx context.Context, queue func(redis.Pipeliner)) error {
	for attempt := 0; ; attempt++ {
		p := c.rdb.Pipeline()
		queue(p)
		_, err := p.Exec(ctx)
		if err == nil {
			return nil
		}
		if attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := c.LoadScripts(ctx); err != nil {
				return err
			}
			continue
		}
		return fmt.Errorf("cache: write: %w", err)
	}
}

// LoadScripts loads the write scripts on every Redis server.
func (c *Cache) LoadScripts(ctx context.Context) error {
	for _, s := range scripts {
		if err := s.Load(ctx, c.rdb).Err(); err != nil {
			return fmt.Errorf("cache: load script: %w", err)
		}
	}
	return nil
}

// Ping checks that Redis answers.
func (c *Cache) Ping(ctx context.Context) error {
	return c.rdb.Ping(ctx).Err()
}

// TopologyChanged receives a value after the masters of a Redis Cluster
// changed (see redisx.Cluster.Changed); nil (never ready) for one server.
func (c *Cache) TopologyChanged() <-chan struct{} {
	if cl, ok := c.rdb.(*redisx.Cluster); ok {
		return cl.Changed()
	}
	return nil
}

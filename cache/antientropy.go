package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/store"
)

// Reads and bookkeeping for ingest's anti-entropy pass, which compares the
// revisions Redis holds with the store's and rewrites what is behind.

// Revisions are the revisions Redis holds for some documents; 0 means the
// document (or listing entry) is missing.
type Revisions struct {
	// Events are the revisions of event documents, Listing those of the
	// events' listing entries (written with the same revision).
	Events, Listing map[string]int64
	// Markets are the revisions of price items.
	Markets map[string]int64
}

// ReadRevisions reads, in one pipeline (split per node on a cluster), the
// revisions of the given events' documents and listing entries and of the
// given markets' price items. Any read that fails fails the whole call: a
// shard that cannot be read is not a shard that lost its data.
func (c *Cache) ReadRevisions(ctx context.Context, events, markets []string) (Revisions, error) {
	r := Revisions{
		Events:  make(map[string]int64, len(events)),
		Listing: make(map[string]int64, len(events)),
		Markets: make(map[string]int64, len(markets)),
	}
	p := c.rdb.Pipeline()
	ev := make([]*redis.StringCmd, len(events))
	for i, id := range events {
		ev[i] = p.HGet(ctx, c.EventKey(id), "g")
	}
	mk := make([]*redis.StringCmd, len(markets))
	for i, id := range markets {
		mk[i] = p.HGet(ctx, c.MarketKey(id), "g")
	}
	var listing *redis.SliceCmd
	if len(events) > 0 {
		listing = p.HMGet(ctx, c.listingKey("g"), events...)
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return r, fmt.Errorf("cache: read revisions: %w", err)
	}
	read := func(cmds []*redis.StringCmd, ids []string, into map[string]int64) error {
		for i, cmd := range cmds {
			g, err := cmd.Int64()
			switch {
			case errors.Is(err, redis.Nil):
				into[ids[i]] = 0
			case err != nil:
				return fmt.Errorf("cache: read revision of %s: %w", ids[i], err)
			default:
				into[ids[i]] = g
			}
		}
		return nil
	}
	if err := read(ev, events, r.Events); err != nil {
		return r, err
	}
	if err := read(mk, markets, r.Markets); err != nil {
		return r, err
	}
	if listing != nil {
		for i, v := range listing.Val() {
			s, _ := v.(string)
			g, _ := strconv.ParseInt(s, 10, 64)
			r.Listing[events[i]] = g
		}
	}
	return r, nil
}

// TradeWindow sums up a cached trade list: its length and the scores
// (TradeScore) of its oldest and newest members.
type TradeWindow struct {
	N              int64
	Oldest, Newest float64
}

// ReadTradeWindows reads the window of each market's trade list; a market
// with no list is left out.
func (c *Cache) ReadTradeWindows(ctx context.Context, markets []string) (map[string]TradeWindow, error) {
	p := c.rdb.Pipeline()
	type cmds struct {
		n           *redis.IntCmd
		first, last *redis.ZSliceCmd
	}
	q := make([]cmds, len(markets))
	for i, id := range markets {
		k := c.TradesKey(id)
		q[i] = cmds{p.ZCard(ctx, k), p.ZRangeWithScores(ctx, k, 0, 0), p.ZRangeWithScores(ctx, k, -1, -1)}
	}
	if _, err := p.Exec(ctx); err != nil {
		return nil, fmt.Errorf("cache: read trade lists: %w", err)
	}
	out := make(map[string]TradeWindow, len(markets))
	for i, id := range markets {
		n := q[i].n.Val()
		first, last := q[i].first.Val(), q[i].last.Val()
		if n == 0 || len(first) == 0 || len(last) == 0 {
			continue
		}
		out[id] = TradeWindow{N: n, Oldest: first[0].Score, Newest: last[0].Score}
	}
	return out, nil
}

// MissingTrades returns, by market, those of the given trades that a write
// would add to the trade lists Redis holds: absent from their list, and not
// older than the whole of a full list (the write would trim them at once).
// A market none of whose trades is missing is left out. The lists are read
// in one pipeline.
func (c *Cache) MissingTrades(ctx context.Context, trades []store.Trade) (map[string][]store.Trade, error) {
	if len(trades) == 0 {
		return map[string][]store.Trade{}, nil
	}
	byMarket := map[string][]store.Trade{}
	for _, t := range trades {
		byMarket[t.MarketID] = append(byMarket[t.MarketID], t)
	}
	p := c.rdb.Pipeline()
	lists := make(map[string]*redis.ZSliceCmd, len(byMarket))
	for id := range byMarket {
		lists[id] = p.ZRangeWithScores(ctx, c.TradesKey(id), 0, -1)
	}
	if _, err := p.Exec(ctx); err != nil {
		return nil, fmt.Errorf("cache: read trade lists: %w", err)
	}
	out := map[string][]store.Trade{}
	for id, ts := range byMarket {
		list := lists[id].Val()
		have := make(map[string]bool, len(list))
		for _, z := range list {
			if m, ok := z.Member.(string); ok {
				have[m] = true
			}
		}
		for _, t := range ts {
			member, score := string(RenderTrade(&t)), TradeScore(&t)
			if have[member] {
				continue
			}
			if len(list) >= MaxTrades {
				// A full list keeps its newest MaxTrades in (score,
				// member) order: below its oldest, t would not stay.
				oldest, _ := list[0].Member.(string)
				if score < list[0].Score || score == list[0].Score && member < oldest {
					continue
				}
			}
			out[id] = append(out[id], t)
		}
	}
	return out, nil
}

// takeLock takes a lock that is free or already the caller's (a holder that
// could not release it, say while the cluster was down, takes it back).
var takeLock = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// releaseLock deletes a lock only while it still holds the caller's token.
var releaseLock = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// NewLockToken returns a token that names one lock holder (see TryLock).
func NewLockToken() string {
	b := make([]byte, 12)
	rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// TryLock takes the lock name for ttl for the holder token unless another
// holder has it; release gives it back (only if it is still token's). A
// holder whose release was lost takes its lock back on its next try.
func (c *Cache) TryLock(ctx context.Context, name, token string, ttl time.Duration) (release func(), ok bool, err error) {
	key := c.listingKey("lock:" + name)
	n, err := takeLock.Run(ctx, c.rdb, []string{key}, token, ttl.Milliseconds()).Int()
	if err != nil {
		return nil, false, fmt.Errorf("cache: take lock %s: %w", name, err)
	}
	if n == 0 {
		return nil, false, nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		releaseLock.Run(ctx, c.rdb, []string{key}, token) // a lock not released expires by itself
	}, true, nil
}

// Cursor reads a position that workers share (""= none).
func (c *Cache) Cursor(ctx context.Context, name string) (string, error) {
	v, err := c.rdb.Get(ctx, c.listingKey("cursor:"+name)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cache: read cursor %s: %w", name, err)
	}
	return v, nil
}

// SetCursor records a position that workers share.
func (c *Cache) SetCursor(ctx context.Context, name, v string) error {
	if err := c.rdb.Set(ctx, c.listingKey("cursor:"+name), v, 24*time.Hour).Err(); err != nil {
		return fmt.Errorf("cache: write cursor %s: %w", name, err)
	}
	return nil
}

package cache

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Forced writes are what a rebuild sends (it rewrites the store's state with
// the store's revisions); only Rebuild uses them, and Rebuild needs a
// Postgres snapshot, so these unit tests queue them directly, on miniredis.

func forceCache(t *testing.T) (*Cache, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return New(rdb, DefaultPrefix, Rules{}), rdb
}

func writeEvent(t *testing.T, c *Cache, d EventDocument, force bool) {
	t.Helper()
	ctx := context.Background()
	if err := c.exec(ctx, func(p redis.Pipeliner) { c.queueEvent(ctx, p, d, force) }); err != nil {
		t.Fatal(err)
	}
}

func writeMarket(t *testing.T, c *Cache, d MarketDocument, force bool) {
	t.Helper()
	ctx := context.Background()
	if err := c.exec(ctx, func(p redis.Pipeliner) { c.queueMarket(ctx, p, d, 0, force) }); err != nil {
		t.Fatal(err)
	}
}

// state is what Redis holds of event ev and market m.
func state(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	ev := rdb.HGetAll(ctx, "md:{e:ev}").Val()
	m := rdb.HGetAll(ctx, "md:{m:m}").Val()
	g := rdb.HGet(ctx, "md:{i}:g", "ev").Val()
	s := rdb.HGet(ctx, "md:{i}:s", "ev").Val()
	var sets []string
	for _, k := range rdb.Keys(ctx, "md:{i}:f:*").Val() {
		if rdb.ZScore(ctx, k, "ev").Err() == nil {
			sets = append(sets, k)
		}
	}
	slices.Sort(sets)
	return fmt.Sprintf("event %v market %v listing g=%s s=%s sets=%v", ev, m, g, s, sets)
}

// TestForcedWrites: a forced write replaces a document and listing entry of
// the same revision (a rebuild rewriting what the store holds, say after the
// retention changed what is served), never one of a newer revision (ingest
// committed after the rebuild's snapshot); an unforced write of the same
// revision changes nothing.
func TestForcedWrites(t *testing.T) {
	c, rdb := forceCache(t)
	v1 := EventDocument{ID: "ev", Rev: 5, Body: []byte(`{"v":1}`), Summary: []byte(`{"s":1}`), Sets: []string{"*:*:1", "a:*:1"}, Volume: 1}
	v2 := EventDocument{ID: "ev", Rev: 5, Body: []byte(`{"v":2}`), Summary: []byte(`{"s":2}`), Sets: []string{"*:*:1", "b:*:1"}, Volume: 2}
	m1 := MarketDocument{ID: "m", Rev: 5, Served: true, Body: []byte(`{"p":1}`)}
	m2 := MarketDocument{ID: "m", Rev: 5}
	writeEvent(t, c, v1, false)
	writeMarket(t, c, m1, false)
	first := state(t, rdb)

	writeEvent(t, c, v2, false)
	writeMarket(t, c, m2, false)
	if got := state(t, rdb); got != first {
		t.Errorf("unforced write of the same revision:\n got %s\nwant %s", got, first)
	}

	writeEvent(t, c, v2, true)
	writeMarket(t, c, m2, true)
	want := `event map[b:{"v":2} g:5] market map[g:5] listing g=5 s={"s":2} sets=[md:{i}:f:*:*:1 md:{i}:f:b:*:1]`
	if got := state(t, rdb); got != want {
		t.Errorf("forced write of the same revision:\n got %s\nwant %s", got, want)
	}

	newer := EventDocument{ID: "ev", Rev: 6, Body: []byte(`{"v":3}`), Summary: []byte(`{"s":3}`), Sets: []string{"c:*:1"}, Volume: 3}
	writeEvent(t, c, newer, false)
	writeMarket(t, c, MarketDocument{ID: "m", Rev: 6, Served: true, Body: []byte(`{"p":3}`)}, false)
	third := state(t, rdb)
	writeEvent(t, c, v1, true)
	writeMarket(t, c, m1, true)
	if got := state(t, rdb); got != third {
		t.Errorf("forced write of an older revision:\n got %s\nwant %s", got, third)
	}
}

// TestForcedUnlist: a forced write that unlists (the rebuild's snapshot says
// the event is no longer listed) removes the entry of the same revision.
func TestForcedUnlist(t *testing.T) {
	c, rdb := forceCache(t)
	writeEvent(t, c, EventDocument{ID: "ev", Rev: 3, Body: []byte(`{}`), Summary: []byte(`{}`), Sets: []string{"*:*:1"}}, false)
	writeEvent(t, c, EventDocument{ID: "ev", Rev: 3, Body: []byte(`{"resolved":true}`)}, true)
	want := `event map[b:{"resolved":true} g:3] market map[] listing g=3 s= sets=[]`
	if got := state(t, rdb); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if n := rdb.ZCard(context.Background(), "md:{i}:v").Val(); n != 0 {
		t.Errorf("the volume ranking still holds %d events", n)
	}
}

package cachetest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/cache/cachetest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// TestReads reads keys written by hand in the layout cache.go documents.
func TestReads(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	c := cache.New(rdb, prefix, cache.Rules{})
	for _, err := range []error{
		rdb.HSet(ctx, c.EventKey("E1"), "g", "3", "b", "body").Err(),
		rdb.ZAdd(ctx, c.TradesKey("M1"), redis.Z{Score: 1, Member: "t1"}, redis.Z{Score: 2, Member: "t2"}).Err(),
		rdb.ZAdd(ctx, c.SetKey("*:*:1"), redis.Z{Member: "E1"}, redis.Z{Member: "E2"}, redis.Z{Member: "E3"}).Err(),
		rdb.HSet(ctx, prefix+"{i}:s", "E1", "s1", "E3", "s3").Err(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}

	ev, err := cachetest.Event(ctx, rdb, c, "E1")
	if err != nil || !ev.Found || ev.Rev != 3 || string(ev.Body) != "body" {
		t.Errorf("Event: got %+v, %v; want found, rev 3, body", ev, err)
	}
	if ev, err := cachetest.Event(ctx, rdb, c, "E9"); err != nil || ev.Found {
		t.Errorf("Event of a missing one: got %+v, %v; want not found", ev, err)
	}

	trades, err := cachetest.Trades(ctx, rdb, c, "M1", 5)
	if err != nil || len(trades) != 2 || string(trades[0]) != "t2" || string(trades[1]) != "t1" {
		t.Errorf("Trades: got %q, %v; want [t2 t1] (newest first)", trades, err)
	}

	ids, sums, err := cachetest.ListPage(ctx, rdb, c, "*:*:1", "E1", 10)
	if err != nil || !slices.Equal(ids, []string{"E2", "E3"}) || len(sums) != 2 || sums[0] != nil || string(sums[1]) != "s3" {
		t.Errorf("ListPage after E1: got %v %q, %v; want [E2 E3] [nil s3]", ids, sums, err)
	}
	if ids, sums, err := cachetest.ListPage(ctx, rdb, c, "none", "", 10); err != nil || len(ids) != 0 || sums != nil {
		t.Errorf("ListPage of an empty set: got %v %q, %v", ids, sums, err)
	}
}

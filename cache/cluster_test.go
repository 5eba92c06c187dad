package cache_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// openCluster returns a client of the test cluster (what redisx.Open
// makes of MD_REDIS_URL) and a cache on it under the prefix "md:".
func openCluster(t *testing.T, cl *testenv.RedisCluster) (*redisx.Cluster, *cache.Cache) {
	t.Helper()
	c := cl.Open(t)
	return c, cache.New(c, "md:", testRules())
}

// spreadBatch is n events with two markets each, prices and trades: enough
// documents to land on every shard of a cluster.
func spreadBatch(n int, version int64) store.Batch {
	var b store.Batch
	for i := range n {
		id := fmt.Sprintf("S%03d", i)
		e := activeEvent(id, "spread", map[string]string{"a": "A" + id, "b": "B" + id})
		e.Version, e.UpdatedAt, e.Volume = version, testNow, float64(i*10+int(version))
		b.Events = append(b.Events, *e)
		for j := range 2 {
			m := activeMarket(fmt.Sprintf("%s-m%d", id, j), id)
			m.Version, m.UpdatedAt = version, testNow
			b.Markets = append(b.Markets, m)
			b.Prices = append(b.Prices, store.Price{MarketID: m.ID, Version: version, TS: testNow,
				Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.4), ptr(0.45), nil, float64(version))}})
			b.Trades = append(b.Trades, store.Trade{MarketID: m.ID, TradeID: fmt.Sprintf("%s-v%d", m.ID, version),
				Venue: "venue_a", Price: 0.4, Size: 1, Side: "buy", TS: testNow.Add(time.Duration(version) * time.Second)})
		}
	}
	return b
}

// reference is what a rebuild from st leaves in Redis: the store rebuilt
// into an empty prefix of the shared single Redis.
func reference(t *testing.T, st *store.Store) map[string]string {
	t.Helper()
	c, rdb, prefix := newCache(t)
	rebuild(t, st, c)
	return dump(t, rdb, prefix)
}

// TestClusterRebuildPrunesEveryShard: on a real cluster (run it under
// -race: the masters are scanned in parallel), a rebuild removes junk
// planted on every shard and repairs damage, leaving exactly what a rebuild
// from Postgres holds.
func TestClusterRebuildPrunesEveryShard(t *testing.T) {
	ctx := context.Background()
	cl := testenv.StartRedisCluster(t)
	rdb, c := openCluster(t, cl)
	st := newStore(t)
	batches := append(rebuildBatches(), spreadBatch(60, 1), spreadBatch(30, 2))
	for i, b := range batches {
		res, err := st.ApplyBatch(ctx, &b)
		if err != nil {
			t.Fatalf("batch %d: %v", i+1, err)
		}
		apply(t, c, res)
	}
	want := reference(t, st)

	// Junk documents, trade lists and listing entries on every master.
	masters, err := cl.Masters(ctx)
	if err != nil || len(masters) != 3 {
		t.Fatalf("masters: %v (%v)", masters, err)
	}
	planted := map[string]bool{}
	for i := 0; len(planted) < 3 || i < 30; i++ {
		id := fmt.Sprintf("junk%d", i)
		for _, key := range []string{"md:{e:" + id + "}", "md:{m:" + id + "}"} {
			addr, err := cl.MasterOf(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			planted[addr] = true
		}
		must(t, rdb.Set(ctx, "md:{e:"+id+"}", "x", 0).Err())
		must(t, rdb.HSet(ctx, "md:{m:"+id+"}", "g", "1", "s", "1").Err())
		must(t, rdb.ZAdd(ctx, "md:{m:"+id+"}:t", redis.Z{Score: 1, Member: "{}"}).Err())
		must(t, rdb.HSet(ctx, "md:{i}:g", id, "5").Err())
		must(t, rdb.ZAdd(ctx, "md:{i}:f:*:*:1", redis.Z{Member: id}).Err())
	}
	must(t, rdb.HSet(ctx, c.EventKey("S007"), "b", "garbage").Err())
	must(t, rdb.Del(ctx, c.MarketKey("S011-m1")).Err())

	stats := rebuild(t, st, c)
	if stats.Pruned < 90 {
		t.Errorf("pruned: got %d, want at least 90 junk keys", stats.Pruned)
	}
	checkDump(t, dump(t, rdb, "md:"), want)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestClusterRebuildBehindRewrittenAddresses: when the client reaches the
// cluster under another name than the nodes announce (a hostname, NAT),
// go-redis rewrites the announced loopback addresses, and a rebuild still
// knows it scanned every master and prunes junk.
func TestClusterRebuildBehindRewrittenAddresses(t *testing.T) {
	ctx := context.Background()
	cl := testenv.StartRedisCluster(t)
	const host = "redis.nat.invalid"
	var addrs []string
	for _, a := range cl.Addrs() {
		_, port, _ := net.SplitHostPort(a)
		addrs = append(addrs, net.JoinHostPort(host, port))
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		},
	})
	t.Cleanup(func() { rdb.Close() })
	c := cache.New(rdb, "md:", testRules())
	st := newStore(t)
	b := spreadBatch(20, 1)
	res, err := st.ApplyBatch(ctx, &b)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, c, res)
	must(t, rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if a := m.Options().Addr; !strings.HasPrefix(a, host+":") {
			return fmt.Errorf("master dialled as %s, want the rewritten %s:port", a, host)
		}
		return nil
	}))
	for i := range 30 {
		must(t, rdb.Set(ctx, fmt.Sprintf("md:{e:junk%d}", i), "x", 0).Err())
	}
	stats := rebuild(t, st, c)
	if stats.Pruned < 30 {
		t.Errorf("pruned: got %d, want at least 30 junk keys", stats.Pruned)
	}
}

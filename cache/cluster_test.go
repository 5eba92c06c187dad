package cache_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// openCluster returns a cache client of the test cluster (what cache.Open
// makes of MD_REDIS_URL) and a cache on it under the prefix "md:".
func openCluster(t *testing.T, cl *testenv.RedisCluster) (*cache.Cluster, *cache.Cache) {
	t.Helper()
	rdb, err := cache.Open(cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	c, ok := rdb.(*cache.Cluster)
	if !ok {
		t.Fatalf("cache.Open(%q): got %T, want *cache.Cluster", cl.URL(), rdb)
	}
	c.SetLogger(slog.New(slog.NewTextHandler(t.Output(), nil)))
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

// TestClusterFollowsFailover: after a master is SIGKILLed and its replica
// promoted, the client writes to the new master within 5 s of the
// promotion (go-redis alone waits for a MOVED answer or its 60 s reload),
// announces the change, and Health reports the dead node as degraded, not
// as an error.
func TestClusterFollowsFailover(t *testing.T) {
	ctx := context.Background()
	cl := testenv.StartRedisCluster(t)
	rdb, c := openCluster(t, cl)
	if d, err := cache.Health(ctx, rdb); err != nil || len(d) != 0 {
		t.Fatalf("health of a healthy cluster: %v, %v; want nothing degraded", d, err)
	}
	// Bare go-redis, for comparison (logged, not asserted).
	bare := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer bare.Close()
	key := c.MarketKey("follow")
	must(t, rdb.Set(ctx, key, "0", 0).Err())
	must(t, bare.Set(ctx, key, "0", 0).Err())

	dead := cl.KillMaster(ctx, key)
	// Traffic while the shard is down, as an API node or ingest makes.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, promoted, err := cl.WaitPromoted(wctx, dead, key)
	if err != nil {
		t.Fatal(err)
	}
	var ours, pipe, theirs time.Duration = -1, -1, -1
	for i := 0; ours < 0 || pipe < 0 || (theirs < 0 && time.Since(promoted) < 8*time.Second); i++ {
		if time.Since(promoted) > 20*time.Second {
			break
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		if ours < 0 && rdb.Set(cctx, key, i, 0).Err() == nil {
			ours = time.Since(promoted)
		}
		// Ingest writes in pipelines of scripts.
		if pipe < 0 {
			if _, err := c.ApplyDocs(cctx, nil, []store.MarketDoc{{ID: "follow-pipe", Rev: int64(i + 1)}}, nil); err == nil {
				pipe = time.Since(promoted)
			}
		}
		if theirs < 0 && bare.Set(cctx, key, i, 0).Err() == nil {
			theirs = time.Since(promoted)
		}
		ccancel()
		time.Sleep(50 * time.Millisecond) // pacing the probe writes, not waiting for an event
	}
	t.Logf("writes land again %v after the promotion, pipelined cache writes %v (bare go-redis: %v, -1 = not within 8 s)", ours, pipe, theirs)
	if ours < 0 || ours > 5*time.Second {
		t.Errorf("writes to the new master: got %v after the promotion, want within 5s", ours)
	}
	if pipe < 0 || pipe > 5*time.Second {
		t.Errorf("pipelined cache writes: got %v after the promotion, want within 5s", pipe)
	}
	for i := range 20 {
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("write %d after following the failover: %v", i, err)
		}
	}
	select {
	case <-c.TopologyChanged():
	case <-time.After(10 * time.Second):
		t.Errorf("no topology change announced")
	}
	var degraded map[string]string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		degraded, err = cache.Health(ctx, rdb)
		if err == nil && degraded["redis "+dead] != "" {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling the cluster's view
	}
	if err != nil || degraded["redis "+dead] == "" {
		t.Errorf("health after the failover: %v, %v; want %s degraded and no error", degraded, err, dead)
	}
	if n := rdb.NodesDown(); n < 1 {
		t.Errorf("nodes down: got %d, want at least 1", n)
	}

	// The dead node comes back (as a replica): nothing is degraded any more.
	cl.Restart(ctx, dead)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if degraded, err = cache.Health(ctx, rdb); err == nil && len(degraded) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling the cluster's view
	}
	if err != nil || len(degraded) != 0 {
		t.Errorf("health after the node came back: %v, %v; want nothing degraded", degraded, err)
	}
}

// TestHealthSingle: one server is healthy while it answers PING and an
// error when it does not.
func TestHealthSingle(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Redis(t)
	if d, err := cache.Health(ctx, rdb); err != nil || len(d) != 0 {
		t.Errorf("health: %v, %v; want healthy", d, err)
	}
	l := testenv.ClosedPort(t)
	down, err := cache.Open("redis://" + l + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if _, err := cache.Health(ctx, down); err == nil {
		t.Errorf("health of a dead server: got no error")
	}
}

// TestOpenURLs: MD_REDIS_URL forms give the right kind of client, with
// AUTH and TLS taken from a cluster URL.
func TestOpenURLs(t *testing.T) {
	cases := []struct {
		url     string
		cluster bool
		user    string
		tls     bool
	}{
		{"redis://127.0.0.1:6379/0", false, "", false},
		{"rediss://u:p@127.0.0.1:6380/0", false, "u", true},
		{"redis://user:pass@127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002", true, "user", false},
		{"rediss://user:pass@127.0.0.1:7000?addr=127.0.0.1:7001", true, "user", true},
		{"127.0.0.1:7000,127.0.0.1:7001", true, "", false},
	}
	for _, tc := range cases {
		rdb, err := cache.Open(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		switch r := rdb.(type) {
		case *cache.Cluster:
			o := r.Options()
			if !tc.cluster || o.Username != tc.user || (o.TLSConfig != nil) != tc.tls || o.DialTimeout != time.Second {
				t.Errorf("%s: cluster user %q tls %v dial %v; want cluster %v user %q tls %v dial 1s",
					tc.url, o.Username, o.TLSConfig != nil, o.DialTimeout, tc.cluster, tc.user, tc.tls)
			}
		case *redis.Client:
			o := r.Options()
			if tc.cluster || o.Username != tc.user || (o.TLSConfig != nil) != tc.tls || o.DialTimeout != time.Second {
				t.Errorf("%s: single user %q tls %v dial %v; want cluster %v user %q tls %v dial 1s",
					tc.url, o.Username, o.TLSConfig != nil, o.DialTimeout, tc.cluster, tc.user, tc.tls)
			}
		default:
			t.Errorf("%s: got %T", tc.url, rdb)
		}
		rdb.Close()
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

// TestOpenErrorHidesPassword: a malformed MD_REDIS_URL is reported without
// the URL, so its password never reaches a log.
func TestOpenErrorHidesPassword(t *testing.T) {
	const secret = "s3cretPW"
	for _, url := range []string{
		"redis://user:" + secret + "@127.0.0.1:notaport/0",
		"rediss://user:" + secret + "@127.0.0.1:6379/0?dial_timeout=never",
		"redis://user:" + secret + "%zz@127.0.0.1:6379/0",
		"redis://user:" + secret + "@127.0.0.1:notaport?addr=127.0.0.1:7001",
		"redis://user:" + secret + "%zz@127.0.0.1:7000?addr=127.0.0.1:7001",
		"redis://user:" + secret + "@127.0.0.1:7000?addr=127.0.0.1:7001&nope=1",
	} {
		_, err := cache.Open(url)
		if err == nil {
			t.Errorf("open of a malformed url: got no error")
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "%zz") {
			t.Errorf("open error quotes the password: %q", err)
		} else {
			t.Logf("error: %v", err)
		}
	}
}

package redisx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/metrictest"
	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// TestClusterFollowsFailover: after a master is SIGKILLed and its replica
// promoted, the client writes to the new master within 5 s of the
// promotion (go-redis alone waits for a MOVED answer or its 60 s reload),
// announces the change, and Health reports the dead node as degraded, not
// as an error.
func TestClusterFollowsFailover(t *testing.T) {
	ctx := context.Background()
	cl := testenv.StartRedisCluster(t)
	rdb := cl.Open(t)
	// A cache on it, so that writes go as ingest's do: pipelines of scripts.
	c := cache.New(rdb, "md:", cache.Rules{Now: time.Now})
	if d, err := redisx.Health(ctx, rdb); err != nil || len(d) != 0 {
		t.Fatalf("health of a healthy cluster: %v, %v; want nothing degraded", d, err)
	}
	// Bare go-redis, for comparison (logged, not asserted).
	bare := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer bare.Close()
	if d, err := redisx.Health(ctx, bare); err != nil || len(d) != 0 {
		t.Fatalf("health of a healthy cluster through a plain client: %v, %v; want nothing degraded", d, err)
	}
	reg := prometheus.NewRegistry()
	if err := redisx.RegisterMetrics(reg, rdb); err != nil {
		t.Fatal(err)
	}
	key := c.MarketKey("follow")
	for _, w := range []redis.Cmdable{rdb, bare} {
		if err := w.Set(ctx, key, "0", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

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
		degraded, err = redisx.Health(ctx, rdb)
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
	if got := metrictest.Value(t, reg, "marketdata_redis_nodes_down"); got < 1 {
		t.Errorf("marketdata_redis_nodes_down = %v, want at least 1", got)
	}

	// The dead node comes back (as a replica): nothing is degraded any more.
	cl.Restart(ctx, dead)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if degraded, err = redisx.Health(ctx, rdb); err == nil && len(degraded) == 0 {
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
	if d, err := redisx.Health(ctx, rdb); err != nil || len(d) != 0 {
		t.Errorf("health: %v, %v; want healthy", d, err)
	}
	l := testenv.ClosedPort(t)
	down, err := redisx.Open("redis://" + l + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if _, err := redisx.Health(ctx, down); err == nil {
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
		rdb, err := redisx.Open(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		switch r := rdb.(type) {
		case *redisx.Cluster:
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
		_, err := redisx.Open(url)
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

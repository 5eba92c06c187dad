package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
)

// TestLeasesExactOnCluster: TestLeasesExactAcrossNodes, with the nodes on
// Redis Cluster.
func TestLeasesExactOnCluster(t *testing.T) {
	testenv.Integration(t, "redis-server")
	c := testenv.StartRedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { rdb.Close() })
	for i := range 5 {
		exactAcrossNodes(t, rdb, fmt.Sprintf("t%d:", i), 90, 9, 3, DefaultTimeout)
	}
}

// TestSuspectsConfirmedOnCluster: TestSuspectsBlockAcrossNodes's
// confirmation on Redis Cluster, through the client the binary opens
// (redisx, which wraps go-redis's cluster client): both nodes' subscriptions
// are counted, the failure that reaches the limit waits for the node that
// hears late, and no block is answered unconfirmed.
func TestSuspectsConfirmedOnCluster(t *testing.T) {
	testenv.Integration(t, "redis-server")
	c := testenv.StartRedisCluster(t)
	cfg := Config{Limit: 1000, Window: time.Minute, AuthFailLimit: 4, AuthFailWindow: time.Minute, Prefix: "sc:", Timeout: 2 * time.Second}
	var nodes []*Limiter
	for range 2 {
		rdb, err := redisx.Open(c.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		nodes = append(nodes, mustNewInternal(t, rdb, cfg))
	}
	a, b := nodes[0], nodes[1]
	runWithLateHearer(t, a, b)
	ctx := context.Background()
	if n, err := a.subscribers(ctx); err != nil || n != 2 {
		t.Fatalf("subscribers of the first failures on the cluster: %d, %v; want 2", n, err)
	}
	const bad = "203.0.113.9"
	failToLimitConfirmed(t, a, b, bad)
	if adm, err := b.Admit(ctx, bad, "acc"); err != nil || !adm.Blocked {
		t.Errorf("a good key from the blocked address on node b: %+v, %v; want blocked", adm, err)
	}
}

package ratelimit

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

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

package redisx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Health is what /readyz reports of Redis. err means the node cannot use
// Redis at all: a single server does not answer PING, or no cluster node
// answers, or the cluster refuses commands (cluster_state:fail: slots have
// no master, e.g. between a master's death and its replica's promotion).
// degraded (never nil when err is nil) names what is down that the node
// routes around, keyed "redis <addr>": a dead replica, or a dead master
// whose slots another node now serves.
func Health(ctx context.Context, rdb redis.UniversalClient) (degraded map[string]string, err error) {
	switch r := rdb.(type) {
	case *Cluster:
		return r.health(ctx)
	case *redis.ClusterClient:
		info, err := r.ClusterInfo(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("redisx: redis cluster: %w", err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return nil, errors.New("redisx: redis cluster: cluster_state is not ok")
		}
		return map[string]string{}, nil
	default:
		if err := rdb.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("redisx: redis: %w", err)
		}
		return map[string]string{}, nil
	}
}

func (c *Cluster) health(ctx context.Context) (map[string]string, error) {
	view, ok := c.readView(ctx)
	if !ok {
		c.down.Store(-1)
		return nil, errors.New("redisx: redis cluster: no node answers")
	}
	c.down.Store(int64(len(view.down)))
	c.mu.Lock()
	addr := c.last
	c.mu.Unlock()
	info, err := c.probe(addr).ClusterInfo(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("redisx: redis cluster: cluster info from %s: %w", addr, err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return nil, fmt.Errorf("redisx: redis cluster: %s reports cluster_state fail (slots without a live master)", addr)
	}
	degraded := make(map[string]string, len(view.down))
	for a, role := range view.down {
		switch role {
		case "master":
			degraded["redis "+a] = "master down; its slots are served by another node"
		case "master serving slots":
			// Only with cluster-require-full-coverage no: the others serve.
			degraded["redis "+a] = "master down; its slots have no live master (their reads fall back to Postgres)"
		default:
			degraded["redis "+a] = "replica down"
		}
	}
	return degraded, nil
}

// RegisterMetrics registers marketdata_redis_nodes_down on reg: for a
// cluster, the nodes CLUSTER NODES reports failed at the failover watcher's
// last look (every node it knows when none answers); for one server, 1 while
// it does not answer PING.
func RegisterMetrics(reg prometheus.Registerer, rdb redis.UniversalClient) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "marketdata_redis_nodes_down",
		Help: "Redis nodes reported down: cluster nodes flagged failed, or 1 while a single server does not answer.",
	}, func() float64 {
		if c, ok := rdb.(*Cluster); ok {
			if n := c.NodesDown(); n >= 0 {
				return float64(n)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			return float64(max(len(c.view.addrs), len(c.opt.Addrs)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if rdb.Ping(ctx).Err() != nil {
			return 1
		}
		return 0
	})
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("redisx: register metrics: %w", err)
	}
	return nil
}

package redisx_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/metrictest"
	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
)

// TestHealthBareClusterDown: a plain cluster client none of whose nodes
// answers is an error for /readyz.
func TestHealthBareClusterDown(t *testing.T) {
	bare := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{testenv.ClosedPort(t)}, MaxRedirects: -1})
	defer func() { _ = bare.Close() }()
	if d, err := redisx.Health(context.Background(), bare); err == nil || !strings.Contains(err.Error(), "redis cluster") {
		t.Errorf("health of a dead cluster: %v, %v; want an error", d, err)
	}
}

// TestRegisterMetricsSingle: marketdata_redis_nodes_down is 0 while the
// server answers and 1 while it does not; it registers once per registry.
func TestRegisterMetricsSingle(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	up := prometheus.NewRegistry()
	if err := redisx.RegisterMetrics(up, rdb); err != nil {
		t.Fatal(err)
	}
	if got := metrictest.Value(t, up, "marketdata_redis_nodes_down"); got != 0 {
		t.Errorf("nodes down of an answering server = %v, want 0", got)
	}
	if err := redisx.RegisterMetrics(up, rdb); err == nil {
		t.Error("a second registration on the same registry: no error")
	}

	down := redis.NewClient(&redis.Options{Addr: testenv.ClosedPort(t), MaxRetries: -1})
	defer func() { _ = down.Close() }()
	reg := prometheus.NewRegistry()
	if err := redisx.RegisterMetrics(reg, down); err != nil {
		t.Fatal(err)
	}
	if got := metrictest.Value(t, reg, "marketdata_redis_nodes_down"); got != 1 {
		t.Errorf("nodes down of a dead server = %v, want 1", got)
	}
}

// TestConnect: Connect hands out a client only once Redis answers.
func TestConnect(t *testing.T) {
	ctx := context.Background()
	testenv.Redis(t) // skips (or fails in CI) without Redis
	o, err := redisx.ParseURL(testenv.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := redisx.Connect(ctx, o)
	if err != nil {
		t.Fatalf("Connect to the running Redis: %v", err)
	}
	defer func() { _ = rdb.Close() }()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("ping after Connect: %v", err)
	}

	o, err = redisx.ParseURL("redis://" + testenv.ClosedPort(t) + "/0")
	if err != nil {
		t.Fatal(err)
	}
	if rdb, err := redisx.Connect(ctx, o); err == nil || rdb != nil || !strings.Contains(err.Error(), "ping redis") {
		t.Errorf("Connect to a dead server = %v, %v; want no client and an error", rdb, err)
	}
}

package clustertest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
)

// admissionsMetric counts the requests whose window Redis decided; it stands
// still while a node's limiter falls back to its share, so its first growth
// after a failover is the moment the node follows the new master.
const admissionsMetric = "marketdata_ratelimit_admissions_total"

// followBound is the contract's bound on following a new master.
const followBound = 5 * time.Second

// TestRedisMasterKilledUnderLoad: the master serving the account's window
// key is SIGKILLed while three API nodes serve reads and ingest writes
// prices. No answer is a 5xx other than 503, no 200 differs from the answer
// before; every node follows the promoted replica within 5 s of the
// promotion; every acknowledged price version is applied; and once the
// anti-entropy pass ran, Redis holds what a rebuild from Postgres writes,
// writes lost with the master and documents set behind included.
func TestRedisMasterKilledUnderLoad(t *testing.T) {
	s := cl(t)
	started := time.Now()
	ctx := context.Background()
	w := s.world(t)
	rdb := clusterClient(t)
	probes := s.agree(t, s.apis, s.paths(t, w))

	slot, err := keySlot(ctx, rdb, "md:{rl:"+s.account+"}")
	if err != nil {
		t.Fatal(err)
	}
	master, replica, err := slotOwner(ctx, livePort(ctx, 0), slot)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing master 127.0.0.1:%d (slot %d of the window key); its replica is 127.0.0.1:%d", master.port, slot, replica.port)

	pub := startPublisher(t, w.churnRedis, 20*time.Millisecond)
	l := startLoad(t, s, probes, 6)
	l.waitServed(t, 300)

	killed := time.Now()
	s.clusterT(t, "kill-redis", strconv.Itoa(master.port))
	s.restoreAtEnd(t, "start-redis", strconv.Itoa(master.port))

	promoted := awaitPromotion(t, master, replica)
	t.Logf("promotion seen %s after the kill", promoted.Sub(killed).Round(time.Millisecond))

	// Following: the first growth of each node's Redis-decided admissions
	// after the promotion, polled from the promotion on while the documents
	// are set behind (that can take seconds: a fresh client, a dead node).
	followed := make([]time.Duration, len(s.apis))
	base := make([]float64, len(s.apis))
	for i, n := range s.apis {
		base[i], err = n.metric(ctx, admissionsMetric)
		if err != nil {
			t.Fatal(err)
		}
	}
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		pending := len(s.apis)
		for deadline := time.Now().Add(45 * time.Second); pending > 0 && time.Now().Before(deadline); {
			for i, n := range s.apis {
				if followed[i] != 0 {
					continue
				}
				v, err := n.metric(ctx, admissionsMetric)
				if err == nil && v > base[i] {
					followed[i] = time.Since(promoted)
					pending--
				}
			}
			time.Sleep(50 * time.Millisecond) // polling interval
		}
	}()

	// Writes lost with the master, made certain: two documents behind.
	behind := time.Now()
	s.setBehind(t, w.lagged)
	t.Logf("documents set behind in %s", time.Since(behind).Round(time.Millisecond))
	<-polled
	l.waitServed(t, 300)
	l.finish()
	l.check(t)
	// From the kill to the promotion (seconds) a shard has no master: the
	// truth on /readyz is "degraded" (200, the shard named), never 503.
	for _, n := range s.apis {
		if l.degraded[n.name] == 0 {
			t.Errorf("%s /readyz never reported Redis degraded while a master was dead (polled every 200 ms from before the kill)", n.name)
		}
	}
	for i, n := range s.apis {
		switch {
		case followed[i] == 0:
			t.Errorf("%s: no window decided by Redis within 45 s of the promotion (still on its fallback share)", n.name)
		case followed[i] > followBound:
			t.Errorf("%s followed the new master %s after the promotion, want within %s", n.name, followed[i].Round(time.Millisecond), followBound)
		default:
			t.Logf("%s followed the new master %s after the promotion", n.name, followed[i].Round(time.Millisecond))
		}
		if last, ok := l.last503[n.name]; ok {
			t.Logf("%s: last 503 %s after the promotion", n.name, last.Sub(promoted).Round(time.Millisecond))
		}
	}

	// The killed node comes back as a replica; the topology is whole again.
	s.clusterT(t, "start-redis", strconv.Itoa(master.port))
	s.clusterT(t, "wait")

	pub.finish()
	_, sent, retries := pub.result()
	t.Logf("publisher: %d price updates acknowledged, %d publishes retried", sent, retries)
	s.checkApplied(t, pub)

	// A client of its own: the test's first one still knows the old map.
	s.waitRedisEqualsRebuild(t, clusterClient(t), promoted)
	t.Logf("TestRedisMasterKilledUnderLoad took %s", time.Since(started).Round(time.Millisecond))
}

// antiEntropyBound is how long after a failover the suite waits for the
// anti-entropy pass to leave Redis equal to a rebuild.
const antiEntropyBound = 90 * time.Second

// waitRedisEqualsRebuild rebuilds into a prefix of its own and waits until
// the cache under md: holds the same documents and listing.
func (s *suite) waitRedisEqualsRebuild(t *testing.T, rdb *redis.ClusterClient, since time.Time) {
	t.Helper()
	ctx := context.Background()
	want := s.rebuildInto(t, rdb, testenv.Name("rb")+":")
	var diffs []string
	for {
		got, err := dump(ctx, rdb, "md:")
		if err != nil {
			t.Fatal(err)
		}
		if diffs = diffDumps(got, want, 8); len(diffs) == 0 {
			repaired := 0.0
			for _, c := range s.ingests {
				if v, err := c.metric(ctx, "marketdata_ingest_antientropy_repaired_total"); err == nil {
					repaired += v
				}
			}
			t.Logf("Redis equals a rebuild %s after the failover (%d keys; ingest's anti-entropy repaired %v documents)",
				time.Since(since).Round(time.Millisecond), len(got), repaired)
			return
		}
		if time.Since(since) > antiEntropyBound {
			t.Fatalf("%s after the failover Redis still differs from a rebuild from Postgres:\n%s",
				antiEntropyBound, strings.Join(diffs, "\n"))
		}
		time.Sleep(time.Second) // polling interval
	}
}

// setBehind makes the cache lose writes as an asynchronous replica does:
// the first market's document goes back one revision, the second's is gone.
func (s *suite) setBehind(t *testing.T, markets []string) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	for try, deadline := 1, time.Now().Add(30*time.Second); ; try++ {
		// A new client each try: it reads the slot map as it is now.
		rdb := newClusterClient()
		err := rdb.HIncrBy(ctx, "md:{m:"+markets[0]+"}", "g", -1).Err()
		if err == nil {
			err = rdb.Del(ctx, "md:{m:"+markets[1]+"}").Err()
		}
		rdb.Close()
		if err == nil {
			if try > 1 || time.Since(start) > time.Second {
				t.Logf("documents set behind at try %d, %s", try, time.Since(start).Round(time.Millisecond))
			}
			return
		}
		t.Logf("set documents behind, try %d (%s): %v", try, time.Since(start).Round(time.Millisecond), err)
		if time.Now().After(deadline) {
			t.Fatalf("set cache documents behind: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // the cluster is still failing over
	}
}

// awaitPromotion waits until replica appears as a master in CLUSTER NODES
// (its master was killed) and returns when it was seen.
func awaitPromotion(t *testing.T, master, replica clusterNode) time.Time {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); ; {
		nodes, err := clusterNodes(ctx, livePort(ctx, master.port))
		if err == nil {
			for _, n := range nodes {
				if n.id == replica.id && n.isMaster() {
					return time.Now()
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica 127.0.0.1:%d not promoted within 60 s of killing its master 127.0.0.1:%d", replica.port, master.port)
		}
		time.Sleep(25 * time.Millisecond) // polling interval
	}
}

// livePort returns a Redis port other than skip whose node answers.
func livePort(ctx context.Context, skip int) int {
	for _, p := range redisPorts {
		if p == skip {
			continue
		}
		c := nodeClient(p)
		err := c.Ping(ctx).Err()
		c.Close()
		if err == nil {
			return p
		}
	}
	return redisPorts[0]
}

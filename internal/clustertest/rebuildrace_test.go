package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestCacheRebuildRaceOnCluster: `marketdata cache rebuild` built with -race
// runs against the cluster with junk planted on every shard; it exits 0,
// the race detector reports nothing, and Redis then holds exactly what a
// rebuild from Postgres writes (no junk survives).
func TestCacheRebuildRaceOnCluster(t *testing.T) {
	s := cl(t)
	started := time.Now()
	ctx := context.Background()
	<-s.race.done
	if s.race.err != nil {
		t.Fatal(s.race.err)
	}
	t.Logf("-race binary ready %s into the test", time.Since(started).Round(time.Millisecond))
	rdb := clusterClient(t)
	if err := s.quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	planted := plantJunk(t, rdb)
	t.Logf("planted %d junk keys and entries on 3 shards", len(planted))

	out, stderr, err := s.capture(ctx, s.race.path, []string{"GORACE=halt_on_error=0"},
		"cache", "rebuild", "--json", "--log-format", "text")
	if strings.Contains(stderr, "DATA RACE") {
		t.Errorf("cache rebuild under -race reports a data race:\n%s", tailString(stderr, 6000))
	}
	if err != nil {
		t.Fatalf("cache rebuild under -race: %v (want exit 0)\nstderr:\n%s", err, tailString(stderr, 3000))
	}
	t.Logf("cache rebuild: %s", strings.TrimSpace(string(out)))

	got, err := dump(ctx, rdb, "md:")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range planted {
		if strings.HasPrefix(k, "{") {
			if _, ok := got[k]; ok {
				t.Errorf("junk key md:%s survived the rebuild", k)
			}
		}
	}
	want := s.rebuildInto(t, rdb, testenv.Name("rb")+":")
	if diffs := diffDumps(got, want, 8); len(diffs) > 0 {
		t.Errorf("after the -race rebuild Redis differs from a rebuild from Postgres:\n%s", strings.Join(diffs, "\n"))
	}
	t.Logf("TestCacheRebuildRaceOnCluster took %s", time.Since(started).Round(time.Millisecond))
}

// plantJunk writes junk documents on every master (a hash, a string of the
// wrong type, a trade list) plus junk listing entries and a junk trade in a
// real list; it returns the junk keys without the prefix.
func plantJunk(t *testing.T, rdb *redis.ClusterClient) []string {
	t.Helper()
	ctx := context.Background()
	nodes, err := clusterNodes(ctx, livePort(ctx, 0))
	if err != nil {
		t.Fatal(err)
	}
	perMaster := map[string]int{}
	owner := func(slot int) string {
		for _, n := range nodes {
			for _, r := range n.slots {
				if n.isMaster() && slot >= r[0] && slot <= r[1] {
					return n.id
				}
			}
		}
		return ""
	}
	var planted []string
	for i := 0; len(perMaster) < 3 || minCount(perMaster) < 3; i++ {
		if i > 10000 {
			t.Fatalf("could not place junk on every master: %v", perMaster)
		}
		id := fmt.Sprintf("zzjunk%d", i)
		key := "md:{e:" + id + "}"
		slot, err := keySlot(ctx, rdb, key)
		if err != nil {
			t.Fatal(err)
		}
		m := owner(slot)
		if m == "" || perMaster[m] >= 3 {
			continue
		}
		perMaster[m]++
		must(t, rdb.HSet(ctx, key, "g", "1", "b", `{"junk":true}`).Err())
		must(t, rdb.Set(ctx, "md:{m:"+id+"}", "junk of the wrong type", 0).Err())
		must(t, rdb.ZAdd(ctx, "md:{m:"+id+"}:t", redis.Z{Score: 1, Member: `{"trade_id":"junk"}`}).Err())
		planted = append(planted, "{e:"+id+"}", "{m:"+id+"}", "{m:"+id+"}:t")
	}
	must(t, rdb.HSet(ctx, "md:{i}:s", "zzjunkevent", `{"universal_id":"zzjunkevent"}`).Err())
	must(t, rdb.HSet(ctx, "md:{i}:g", "zzjunkevent", "1").Err())
	must(t, rdb.ZAdd(ctx, "md:{i}:v", redis.Z{Score: -1e12, Member: "zzjunkevent"}).Err())
	planted = append(planted, "listing entry zzjunkevent")
	// A junk member in a real trade list.
	var list string
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, _, err := c.Scan(ctx, 0, "md:{m:*}:t", 100).Result()
		dumpMu.Lock()
		defer dumpMu.Unlock()
		if len(keys) > 0 && list == "" {
			list = keys[0]
		}
		return err
	})
	must(t, err)
	if list != "" {
		must(t, rdb.ZAdd(ctx, list, redis.Z{Score: 9e15, Member: `{"trade_id":"zzjunktrade"}`}).Err())
		planted = append(planted, "junk trade in "+list)
	}
	return planted
}

func minCount(m map[string]int) int {
	low := -1
	for _, v := range m {
		if low < 0 || v < low {
			low = v
		}
	}
	return low
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

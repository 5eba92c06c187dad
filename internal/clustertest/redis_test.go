package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterClient is a Redis Cluster client on the topology.
func clusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	rdb := newClusterClient()
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func newClusterClient() *redis.ClusterClient {
	var addrs []string
	for _, p := range redisPorts {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second, MaxRedirects: 8})
}

// nodeClient is a plain client of one Redis node.
func nodeClient(port int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, master string
	port       int
	flags      string
	slots      [][2]int
}

func (n clusterNode) isMaster() bool {
	return strings.Contains(n.flags, "master") && !strings.Contains(n.flags, "fail")
}

// clusterNodes reads CLUSTER NODES from the node on port.
func clusterNodes(ctx context.Context, port int) ([]clusterNode, error) {
	c := nodeClient(port)
	defer c.Close()
	out, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var nodes []clusterNode
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		_, portS, _ := strings.Cut(addr, ":")
		p, _ := strconv.Atoi(portS)
		n := clusterNode{id: f[0], port: p, flags: f[2], master: f[3]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, ok := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if ok {
				b, _ = strconv.Atoi(hi)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// slotOwner returns the master serving slot and its replica, as the node on
// port sees them.
func slotOwner(ctx context.Context, port, slot int) (master, replica clusterNode, err error) {
	nodes, err := clusterNodes(ctx, port)
	if err != nil {
		return master, replica, err
	}
	for _, n := range nodes {
		for _, r := range n.slots {
			if n.isMaster() && slot >= r[0] && slot <= r[1] {
				master = n
			}
		}
	}
	if master.id == "" {
		return master, replica, fmt.Errorf("no master serves slot %d", slot)
	}
	for _, n := range nodes {
		if n.master == master.id && !strings.Contains(n.flags, "fail") {
			replica = n
		}
	}
	if replica.id == "" {
		return master, replica, fmt.Errorf("master %d has no live replica", master.port)
	}
	return master, replica, nil
}

// keySlot asks Redis for the hash slot of key.
func keySlot(ctx context.Context, rdb *redis.ClusterClient, key string) (int, error) {
	n, err := rdb.ClusterKeySlot(ctx, key).Result()
	return int(n), err
}

// snapshotKey reports whether a key under a prefix is part of the cache
// snapshot (documents and listing), as opposed to limits, presence or locks.
func snapshotKey(rest string) bool {
	switch {
	case strings.HasPrefix(rest, "{e:"), strings.HasPrefix(rest, "{m:"):
		return true
	case strings.HasPrefix(rest, "{i}:"):
		k := rest[len("{i}:"):]
		return k == "g" || k == "s" || k == "k" || k == "v" || k == "m" || strings.HasPrefix(k, "f:")
	}
	return false
}

var dumpMu sync.Mutex

// dump reads every snapshot key under prefix on every master, keyed by the
// name without the prefix, each value rendered as sorted text.
func dump(ctx context.Context, rdb *redis.ClusterClient, prefix string) (map[string]string, error) {
	out := map[string]string{}
	var keys []string
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var mine []string
		for iter.Next(ctx) {
			mine = append(mine, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		dumpMu.Lock()
		keys = append(keys, mine...)
		dumpMu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s*: %w", prefix, err)
	}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, prefix)
		if !snapshotKey(rest) {
			continue
		}
		v, err := render(ctx, rdb, k)
		if err != nil {
			return nil, err
		}
		out[rest] = v
	}
	return out, nil
}

func render(ctx context.Context, rdb *redis.ClusterClient, key string) (string, error) {
	typ, err := rdb.Type(ctx, key).Result()
	if err != nil {
		return "", err
	}
	switch typ {
	case "hash":
		m, err := rdb.HGetAll(ctx, key).Result()
		if err != nil {
			return "", err
		}
		var lines []string
		for f, v := range m {
			if f == "q" {
				continue // a price item's change number: which write stored it, not what it holds
			}
			lines = append(lines, f+"="+v)
		}
		sort.Strings(lines)
		return "hash " + strings.Join(lines, "\n"), nil
	case "zset":
		zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			return "", err
		}
		var lines []string
		for _, z := range zs {
			lines = append(lines, fmt.Sprintf("%v %v", z.Score, z.Member))
		}
		return "zset " + strings.Join(lines, "\n"), nil
	case "string":
		v, err := rdb.Get(ctx, key).Result()
		return "string " + v, err
	case "none":
		return "none", nil
	default:
		return typ, nil
	}
}

// diffDumps lists up to n differences between two dumps.
func diffDumps(got, want map[string]string, n int) []string {
	var diffs []string
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	total := 0
	for _, k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		switch {
		case !gok:
			g = "<absent>"
		case !wok:
			w = "<absent>"
		case g == w:
			continue
		}
		total++
		if len(diffs) < n {
			diffs = append(diffs, fmt.Sprintf("%s: redis has %.300q, a rebuild %.300q", k, onlyIn(g, w), onlyIn(w, g)))
		}
	}
	if total > len(diffs) {
		diffs = append(diffs, fmt.Sprintf("... %d differences in all", total))
	}
	return diffs
}

// rebuildInto runs `marketdata cache rebuild` into another prefix of the same
// cluster and returns its dump: what Redis should hold under md: now. The
// keys are removed afterwards.
func (s *suite) rebuildInto(t *testing.T, rdb *redis.ClusterClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() {
		if err := unlinkPrefix(context.Background(), rdb, prefix); err != nil {
			t.Logf("remove %s*: %v", prefix, err)
		}
	})
	if _, err := s.commandWith(ctx, s.bin, []string{"MD_REDIS_PREFIX=" + prefix},
		"cache", "rebuild", "--notice-subject", "clustertest.unheard"); err != nil {
		t.Fatal(err)
	}
	want, err := dump(ctx, rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// unlinkPrefix removes every key under prefix on every master.
func unlinkPrefix(ctx context.Context, rdb *redis.ClusterClient, prefix string) error {
	return rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Unlink(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	})
}

// onlyIn returns the lines of a that b lacks (the fields or members that
// differ), or all of a when it is one line.
func onlyIn(a, b string) string {
	lines := strings.Split(a, "\n")
	if len(lines) == 1 {
		return a
	}
	have := map[string]bool{}
	for _, l := range strings.Split(b, "\n") {
		have[l] = true
	}
	var out []string
	for _, l := range lines {
		if !have[l] {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}

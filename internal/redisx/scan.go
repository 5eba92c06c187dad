package redisx

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ScanKeys scans the keys of rdb matching pattern on every server (all masters of a
// cluster). fn is never called concurrently: on a cluster the masters are
// scanned in parallel and their keys handed to fn one at a time. On a
// cluster, a scan that did not reach the master of every slot (a failover
// during the scan) is an error: a key the scan missed could not be pruned.
func ScanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string, fn func(string) error) error {
	var mu sync.Mutex
	scan := func(ctx context.Context, client *redis.Client) error {
		iter := client.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			err := fn(iter.Val())
			mu.Unlock()
			if err != nil {
				return err
			}
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("scan %s: %w", client.Options().Addr, err)
		}
		return nil
	}
	switch r := rdb.(type) {
	case clusterClient:
		// Masters are told apart by node ID, not address: go-redis rewrites
		// the addresses CLUSTER SLOTS announces (loopback behind a hostname,
		// NAT), so the address a client dials need not be the announced one.
		scanned := map[string]bool{}
		err := r.ForEachMaster(ctx, func(ctx context.Context, client *redis.Client) error {
			id, err := client.ClusterMyID(ctx).Result()
			if err != nil {
				return fmt.Errorf("cluster myid %s: %w", client.Options().Addr, err)
			}
			if err := scan(ctx, client); err != nil {
				return err
			}
			mu.Lock()
			scanned[id] = true
			mu.Unlock()
			return nil
		})
		if err != nil {
			return err
		}
		slots, err := r.ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Errorf("read the slot map: %w", err)
		}
		for _, s := range slots {
			if len(s.Nodes) == 0 || !scanned[s.Nodes[0].ID] {
				return fmt.Errorf("slots %d-%d: their master was not scanned (the cluster changed during the scan)", s.Start, s.End)
			}
		}
		return nil
	case *redis.Client:
		return scan(ctx, r)
	default:
		return fmt.Errorf("redisx: cannot scan keys on %T", rdb)
	}
}

// clusterClient is a Redis Cluster client: *redis.ClusterClient or *Cluster.
type clusterClient interface {
	ForEachMaster(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
	ClusterSlots(ctx context.Context) *redis.ClusterSlotsCmd
}

// EscapeGlob escapes the characters SCAN's MATCH treats specially, so that
// a key prefix matches itself.
func EscapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

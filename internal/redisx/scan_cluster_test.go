package redisx_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
)

// partialCluster is a cluster client whose view of the masters misses one:
// what go-redis holds between a failover and its reload of the slot map.
type partialCluster struct {
	*redis.ClusterClient
	skip string // the master left out
}

func (p partialCluster) ForEachMaster(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	return p.ClusterClient.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if c.Options().Addr == p.skip {
			return nil
		}
		return fn(ctx, c)
	})
}

// TestScanKeysCluster: on a cluster every master is scanned, whichever
// client holds it (the service's *redisx.Cluster or a bare
// *redis.ClusterClient); fn is never called concurrently; fn's error ends
// the scan; and a scan that did not reach the master of every slot is an
// error, not a partial answer (a key it missed could not be pruned).
func TestScanKeysCluster(t *testing.T) {
	ctx := context.Background()
	cl := testenv.StartRedisCluster(t)
	rdb := cl.Open(t)
	bare := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = bare.Close() })

	// Keys in every slot range, so on every master.
	var want []string
	masters := map[string]bool{}
	for i := range 600 {
		k := fmt.Sprintf("md:m:%04d", i)
		want = append(want, k)
		if err := rdb.Set(ctx, k, "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := bare.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if err := rdb.Set(ctx, "other:m:0001", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if len(masters) != 3 {
		t.Fatalf("keys on %d masters, want all 3", len(masters))
	}
	slices.Sort(want)

	for name, c := range map[string]redis.UniversalClient{"redisx.Cluster": rdb, "redis.ClusterClient": bare} {
		t.Run(name, func(t *testing.T) {
			var got []string
			inFn := false
			var mu sync.Mutex // guards only the check of inFn itself
			err := redisx.ScanKeys(ctx, c, "md:m:*", func(k string) error {
				mu.Lock()
				overlap := inFn
				inFn = true
				mu.Unlock()
				if overlap {
					t.Error("fn called while another call runs")
				}
				got = append(got, k)
				mu.Lock()
				inFn = false
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("scanned %d keys, want the %d under md:m: once each", len(got), len(want))
			}
		})
	}

	t.Run("fn error", func(t *testing.T) {
		stop := errors.New("stop here")
		if err := redisx.ScanKeys(ctx, rdb, "md:m:*", func(string) error { return stop }); !errors.Is(err, stop) {
			t.Errorf("ScanKeys = %v, want fn's error", err)
		}
	})

	t.Run("a master not scanned", func(t *testing.T) {
		m, err := bare.MasterForKey(ctx, "md:m:0000")
		if err != nil {
			t.Fatal(err)
		}
		err = redisx.ScanKeys(ctx, partialCluster{bare, m.Options().Addr}, "md:m:*", func(string) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "master was not scanned") {
			t.Errorf("ScanKeys missing master %s = %v, want an error", m.Options().Addr, err)
		}
	})

	// A master dies (its replica takes over only after the node timeout):
	// the scan cannot reach its keys and says so.
	t.Run("a master down", func(t *testing.T) {
		dead := cl.KillMaster(ctx, "md:m:0000")
		err := redisx.ScanKeys(ctx, bare, "md:m:*", func(string) error { return nil })
		if err == nil {
			t.Fatalf("ScanKeys with master %s dead: no error", dead)
		}
		t.Logf("with master %s dead: %v", dead, err)
	})
}

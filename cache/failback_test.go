package cache_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
)

// followScript is a small window script, like the API's rate limiter runs.
var followScript = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

// pipelineLoad runs pipelined EVALSHA calls on key with 50 ms deadlines, as
// the API's rate limiter does, from a few goroutines, until stopped; it
// records when the last call succeeded.
type pipelineLoad struct {
	last atomic.Int64 // unix nanoseconds of the last successful call
	errs sync.Map     // error text -> count, for the log
	stop chan struct{}
	wg   sync.WaitGroup
}

func startPipelineLoad(t *testing.T, rdb redis.UniversalClient, key string) *pipelineLoad {
	t.Helper()
	l := &pipelineLoad{stop: make(chan struct{})}
	for range 4 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				p := rdb.Pipeline()
				cmd := followScript.EvalSha(ctx, p, []string{key})
				p.Exec(ctx) //nolint:errcheck // judged by cmd
				err := cmd.Err()
				if redis.HasErrorPrefix(err, "NOSCRIPT") {
					err = followScript.Run(ctx, rdb, []string{key}).Err()
				}
				cancel()
				if err == nil {
					l.last.Store(time.Now().UnixNano())
				} else {
					n, _ := l.errs.LoadOrStore(err.Error(), new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
					time.Sleep(5 * time.Millisecond) // pacing retries, not waiting for an event
				}
			}
		}()
	}
	t.Cleanup(l.finish)
	return l
}

func (l *pipelineLoad) finish() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// followedAfter polls until a call succeeds after since, and returns how long
// after since it did, or -1 after 20 s.
func (l *pipelineLoad) followedAfter(since time.Time) time.Duration {
	for deadline := since.Add(20 * time.Second); time.Now().Before(deadline); {
		if last := time.Unix(0, l.last.Load()); last.After(since) {
			return last.Sub(since)
		}
		time.Sleep(10 * time.Millisecond) // polling the load's progress
	}
	return -1
}

func (l *pipelineLoad) logErrors(t *testing.T) {
	t.Helper()
	l.errs.Range(func(k, v any) bool {
		t.Logf("load error %dx: %s", v.(*atomic.Int64).Load(), k)
		return true
	})
	l.errs.Clear()
}

// TestClusterFollowsFailback: the master A of a key dies and its replica B
// is promoted; A comes back (as B's replica); then B dies and A is promoted
// again. Under pipelined script calls with 50 ms deadlines (the rate
// limiter's load), the client follows each promotion within 5 s, the
// second as the first: the node that died once and came back is as good a
// master as any.
func TestClusterFollowsFailback(t *testing.T) {
	ctx := context.Background()
	cl := testenv.StartRedisCluster(t)
	rdb, c := openCluster(t, cl)
	key := c.MarketKey("failback")
	must(t, rdb.Set(ctx, key, "0", 0).Err())
	load := startPipelineLoad(t, rdb, key)
	if load.followedAfter(time.Now().Add(-time.Second)) < 0 {
		t.Fatal("no script call succeeded on the healthy cluster")
	}

	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	a := cl.KillMaster(ctx, key)
	b, promoted, err := cl.WaitPromoted(wctx, a, key)
	if err != nil {
		t.Fatal(err)
	}
	first := load.followedAfter(promoted)
	t.Logf("first failover: %s died, %s promoted; followed %v after the promotion", a, b, first)
	load.logErrors(t)

	cl.Restart(ctx, a)
	if err := cl.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	cl.Kill(b)
	back, promoted, err := cl.WaitPromoted(wctx, b, key)
	if err != nil {
		t.Fatal(err)
	}
	second := load.followedAfter(promoted)
	t.Logf("second failover: %s died, %s promoted; followed %v after the promotion", b, back, second)
	load.logErrors(t)
	load.finish()

	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"first", first}, {"second", second}} {
		if f.d < 0 || f.d > 5*time.Second {
			t.Errorf("%s failover: followed %v after the promotion, want within 5s", f.name, f.d)
		}
	}
}

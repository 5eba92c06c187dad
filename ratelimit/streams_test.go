package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/ratelimit"
)

// newStreams is one node's stream counter with a short lease.
func newStreams(t *testing.T, rdb redis.UniversalClient, prefix string, lease time.Duration, peers func() int) *ratelimit.Streams {
	t.Helper()
	s, err := ratelimit.NewStreams(rdb, ratelimit.StreamsConfig{Limit: 10, Lease: lease, Prefix: prefix, Timeout: time.Second}, peers)
	if err != nil {
		t.Fatalf("NewStreams: %v", err)
	}
	return s
}

// run renews s's leases until the test ends.
func run(t *testing.T, s *ratelimit.Streams) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// open opens n streams of account named node-first… and fails unless each
// got a slot from Redis.
func open(t *testing.T, s *ratelimit.Streams, node, account string, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		if ok, _, err := s.Open(context.Background(), account, fmt.Sprintf("%s-%d", node, i)); !ok || err != nil {
			t.Fatalf("open %s-%d of %s: got %v, %v; want a slot from Redis", node, i, account, ok, err)
		}
	}
}

// full checks that the account's next stream is refused by Redis with a
// retryAfter within (0, lease].
func full(t *testing.T, s *ratelimit.Streams, account string, lease time.Duration) {
	t.Helper()
	if ok, retry, err := s.Open(context.Background(), account, "extra"); ok || err != nil || retry <= 0 || retry > lease {
		t.Fatalf("open past the limit of %s: got %v, %v, %v; want refused by Redis with retryAfter in (0, %v]", account, ok, retry, err, lease)
	}
}

// TestStreamsSharedAcrossNodes: on the real Redis, two nodes share an
// account's 10 streams; Close frees a slot for either; the one key is
// hash-tagged by account and expires by itself.
func TestStreamsSharedAcrossNodes(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	const lease = 15 * time.Second
	a, b := newStreams(t, rdb, prefix, lease, nil), newStreams(t, rdb, prefix, lease, nil)
	open(t, a, "a", "acc", 0, 6)
	open(t, b, "b", "acc", 0, 4)
	full(t, a, "acc", lease)
	full(t, b, "acc", lease)
	a.Close(context.Background(), "acc", "a-0")
	open(t, b, "b", "acc", 4, 1)
	full(t, a, "acc", lease)
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 1 || keys[0] != prefix+"{st:acc}" {
		t.Fatalf("keys: got %q, %v; want only %q", keys, err, prefix+"{st:acc}")
	}
	if ttl, err := rdb.PTTL(ctx, keys[0]).Result(); err != nil || ttl <= 0 || ttl > lease {
		t.Errorf("TTL: got %v, %v; want within (0, %v]", ttl, err, lease)
	}
}

// TestStreamsKilledNodeFreesWithinLease: a node that stops renewing
// (killed) frees its slots within one lease; a live node's slots outlast
// several leases.
func TestStreamsKilledNodeFreesWithinLease(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	const lease = 600 * time.Millisecond
	alive, killed, other := newStreams(t, rdb, prefix, lease, nil), newStreams(t, rdb, prefix, lease, nil), newStreams(t, rdb, prefix, lease, nil)
	run(t, alive)
	run(t, other)
	open(t, alive, "alive", "acc", 0, 5)
	open(t, killed, "killed", "acc", 0, 5) // never renewed
	start := time.Now()
	full(t, other, "acc", lease)
	n := 0
	for n < 5 && time.Since(start) < 2*lease {
		if ok, _, err := other.Open(context.Background(), "acc", fmt.Sprintf("other-%d", n)); err != nil {
			t.Fatal(err)
		} else if ok {
			n++
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if took := time.Since(start); n != 5 || took > lease+200*time.Millisecond {
		t.Fatalf("got %d of the killed node's 5 slots after %v; want 5 within the lease (%v)", n, took, lease)
	}
	// The live nodes' 10 still count once Redis's clock is past the ends of
	// the leases their opens took: they were renewed, not left to lapse.
	ctx := context.Background()
	key := prefix + "{st:acc}"
	var ends float64
	for _, m := range []string{"alive-4", fmt.Sprintf("other-%d", n-1)} {
		end, err := rdb.ZScore(ctx, key, m).Result()
		if err != nil {
			t.Fatalf("ZSCORE %s: %v", m, err)
		}
		ends = max(ends, end)
	}
	for deadline := time.Now().Add(3 * lease); ; time.Sleep(20 * time.Millisecond) {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if float64(now.UnixMilli()) > ends {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis's clock did not pass the leases' first ends (%v ms) within %v", ends, 3*lease)
		}
	}
	full(t, other, "acc", lease)
}

// TestStreamsRenewalAddsBackAfterFlush: when Redis loses the keys (a flush,
// a restart without persistence), a running node puts its open streams back
// within Lease/3, and they count again.
func TestStreamsRenewalAddsBackAfterFlush(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	const lease = 600 * time.Millisecond
	a, b := newStreams(t, rdb, prefix, lease, nil), newStreams(t, rdb, prefix, lease, nil)
	run(t, a)
	open(t, a, "a", "acc", 0, 10)
	ctx := context.Background()
	if err := rdb.Del(ctx, prefix+"{st:acc}").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		n, err := rdb.ZCard(ctx, prefix+"{st:acc}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 10 {
			break
		}
		if time.Since(start) > lease/3+200*time.Millisecond {
			t.Fatalf("%d of 10 slots back after %v; want all within Lease/3 (%v)", n, time.Since(start), lease/3)
		}
		time.Sleep(10 * time.Millisecond)
	}
	full(t, b, "acc", lease)
}

// TestStreamsRedisDownNodeShare: with Redis unreachable, Open answers with
// an error and the node allows each account its share of the limit
// (Limit/peers, rounded up) of its own streams, refusing past it with
// retryAfter = Lease; a Close frees a place.
func TestStreamsRedisDownNodeShare(t *testing.T) {
	for _, c := range []struct{ peers, share int }{{2, 5}, {3, 4}, {1, 10}} {
		t.Run(fmt.Sprintf("peers=%d", c.peers), func(t *testing.T) {
			t.Parallel()
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: 100 * time.Millisecond})
			t.Cleanup(func() { rdb.Close() })
			const lease = 15 * time.Second
			s := newStreams(t, rdb, "down:", lease, func() int { return c.peers })
			ctx := context.Background()
			for i := range c.share {
				if ok, _, err := s.Open(ctx, "acc", fmt.Sprint(i)); !ok || err == nil {
					t.Fatalf("stream %d: got %v, %v; want allowed by the node, with an error", i+1, ok, err)
				}
			}
			if ok, retry, err := s.Open(ctx, "acc", "extra"); ok || err == nil || retry != lease {
				t.Fatalf("stream %d: got %v, %v, %v; want refused with retryAfter %v and an error", c.share+1, ok, retry, err, lease)
			}
			if ok, _, _ := s.Open(ctx, "other", "0"); !ok {
				t.Error("another account: refused, want allowed")
			}
			s.Close(ctx, "acc", "0")
			if ok, _, _ := s.Open(ctx, "acc", "extra"); !ok {
				t.Error("after a Close: refused, want allowed")
			}
		})
	}
}

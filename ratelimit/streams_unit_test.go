package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const unitLease = 15 * time.Second

// newUnitStreams is a stream counter on f ("node" of the test), Limit 10
// unless limit says otherwise, peers 1.
func newUnitStreams(t *testing.T, f *fakeRedis, limit int) *Streams {
	t.Helper()
	s, err := NewStreams(f.rdb, StreamsConfig{Limit: limit, Lease: unitLease, Prefix: "u:", Timeout: 2 * time.Second}, nil)
	if err != nil {
		t.Fatalf("NewStreams: %v", err)
	}
	return s
}

// openN opens streams first..first+n-1 of account ("<node>-<i>"), each
// taking a slot in Redis.
func openN(t *testing.T, s *Streams, node, account string, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		if ok, retry, err := s.Open(context.Background(), account, fmt.Sprintf("%s-%d", node, i)); !ok || retry != 0 || err != nil {
			t.Fatalf("open %s-%d of %s: got %v, %v, %v; want a slot from Redis", node, i, account, ok, retry, err)
		}
	}
}

// refused checks that the next stream of account is refused by Redis with
// retryAfter want (0: any positive).
func refused(t *testing.T, s *Streams, account string, want time.Duration) {
	t.Helper()
	ok, retry, err := s.Open(context.Background(), account, "extra")
	if ok || err != nil || retry <= 0 || (want != 0 && retry != want) {
		t.Fatalf("open past the limit of %s: got %v, %v, %v; want refused by Redis, retryAfter %v", account, ok, retry, err, want)
	}
}

func slots(t *testing.T, f *fakeRedis, s *Streams, account string) int {
	t.Helper()
	if !f.Exists(s.key(account)) {
		return 0
	}
	m, err := f.ZMembers(s.key(account))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestStreamsLimitOnRedisClock: Limit streams open, the next is refused
// with retryAfter = when the soonest lease ends on the Redis clock; an open
// stream opened again counts once; Close frees a slot at once; the key
// expires with the last lease.
func TestStreamsLimitOnRedisClock(t *testing.T) {
	f := newFakeRedis(t, at10s)
	s := newUnitStreams(t, f, 10)
	openN(t, s, "n", "acc", 0, 4)
	f.advance(time.Second)
	openN(t, s, "n", "acc", 4, 6)
	f.advance(2 * time.Second)
	refused(t, s, "acc", unitLease-3*time.Second) // the first 4 leases end soonest
	openN(t, s, "n", "acc", 9, 1)                 // already open: keeps its slot
	openN(t, s, "n", "other", 0, 1)               // accounts are apart
	if got := slots(t, f, s, "acc"); got != 10 {
		t.Errorf("slots: got %d, want 10", got)
	}
	if got := f.TTL(s.key("acc")); got != unitLease {
		t.Errorf("key TTL: got %v, want %v (the lease of the latest open)", got, unitLease)
	}
	s.Close(context.Background(), "acc", "n-3")
	openN(t, s, "n", "acc", 10, 1)
	refused(t, s, "acc", 0)
}

// TestNewStreamsRefusesUnusableConfig names the field it cannot use.
func TestNewStreamsRefusesUnusableConfig(t *testing.T) {
	for _, c := range []struct {
		field string
		cfg   StreamsConfig
	}{
		{"Limit", StreamsConfig{Limit: 0, Lease: time.Second, Timeout: time.Second}},
		{"Lease", StreamsConfig{Limit: 10, Lease: 2 * time.Millisecond, Timeout: time.Second}},
		{"Timeout", StreamsConfig{Limit: 10, Lease: time.Second}},
	} {
		if s, err := NewStreams(nil, c.cfg, nil); s != nil || err == nil || !strings.Contains(err.Error(), "StreamsConfig."+c.field+" ") {
			t.Errorf("%+v: got %v, %v; want an error naming StreamsConfig.%s", c.cfg, s, err, c.field)
		}
	}
}

// TestStreamsNodesShareLimit: two nodes on one Redis share the account's
// Limit; a slot one frees, the other can take.
func TestStreamsNodesShareLimit(t *testing.T) {
	f := newFakeRedis(t, at10s)
	a, b := newUnitStreams(t, f, 10), newUnitStreams(t, f, 10)
	openN(t, a, "a", "acc", 0, 6)
	openN(t, b, "b", "acc", 0, 4)
	refused(t, a, "acc", 0)
	refused(t, b, "acc", 0)
	b.Close(context.Background(), "acc", "b-0")
	openN(t, a, "a", "acc", 6, 1)
	refused(t, b, "acc", 0)
}

// TestStreamsLeaseEndsWithoutRenewal: the slots of a node that stops
// renewing (killed) free exactly one lease after their last renewal, on the
// Redis clock, with no one else's renewal needed; a node that renews keeps
// its slots past the lease.
func TestStreamsLeaseEndsWithoutRenewal(t *testing.T) {
	f := newFakeRedis(t, at10s)
	killed, alive, other := newUnitStreams(t, f, 10), newUnitStreams(t, f, 10), newUnitStreams(t, f, 10)
	openN(t, killed, "k", "acc", 0, 5)
	f.advance(5 * time.Second)
	openN(t, alive, "a", "acc", 0, 5)
	f.advance(5 * time.Second)
	alive.renew(context.Background())
	refused(t, other, "acc", 5*time.Second) // the killed node's leases end first
	f.advance(5*time.Second - time.Millisecond)
	refused(t, other, "acc", time.Millisecond)
	f.advance(time.Millisecond)
	openN(t, other, "o", "acc", 0, 5)
	refused(t, other, "acc", unitLease-5*time.Second) // the live node's renewed leases
	f.advance(unitLease / 3)
	alive.renew(context.Background())
	other.renew(context.Background())
	f.advance(unitLease - time.Millisecond)
	refused(t, other, "acc", time.Millisecond)
}

// TestStreamsRenewAddsBackLost: after Redis lost everything (keys and
// scripts), one renewal puts the node's open streams back, and they count.
func TestStreamsRenewAddsBackLost(t *testing.T) {
	f := newFakeRedis(t, at10s)
	a, b := newUnitStreams(t, f, 10), newUnitStreams(t, f, 10)
	openN(t, a, "a", "acc", 0, 10)
	openN(t, a, "a", "other", 0, 3)
	f.FlushAll()
	if err := f.rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	a.renew(context.Background())
	if got, want := [2]int{slots(t, f, a, "acc"), slots(t, f, a, "other")}, [2]int{10, 3}; got != want {
		t.Errorf("slots after renewal: got %v, want %v", got, want)
	}
	if got := a.readded.Load(); got != 13 {
		t.Errorf("readded: got %d, want 13", got)
	}
	refused(t, b, "acc", unitLease)
}

// roundTrips counts what a client sends: pipelines of script calls, and
// single commands; what go-redis sends to set up a new connection (HELLO,
// CLIENT SETINFO) is not the caller's.
type roundTrips struct{ pipelines, cmds, single atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" {
			r.single.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if scriptCalls(cmds) {
			r.pipelines.Add(1)
			r.cmds.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

func scriptCalls(cmds []redis.Cmder) bool {
	return len(cmds) > 0 && (cmds[0].Name() == "evalsha" || cmds[0].Name() == "eval")
}

// TestStreamsRenewOneRoundTripPerBatch: renewing renewBatch+100 streams of
// 3 accounts takes 2 round trips (one per batch), one script call per
// account in each, and no command of its own.
func TestStreamsRenewOneRoundTripPerBatch(t *testing.T) {
	f := newFakeRedis(t, at10s)
	s := newUnitStreams(t, f, renewBatch)
	for i := range renewBatch + 100 {
		openN(t, s, "n", fmt.Sprintf("acc%d", i%3), i, 1)
	}
	if err := renewStreamsScript.Load(context.Background(), f.rdb).Err(); err != nil {
		t.Fatal(err)
	}
	var rt roundTrips
	f.rdb.AddHook(&rt)
	s.renew(context.Background())
	if p, c, one := rt.pipelines.Load(), rt.cmds.Load(), rt.single.Load(); p != 2 || c > 6 || one != 0 {
		t.Errorf("renewal: %d pipelines of %d commands in all, %d single commands; want 2 pipelines of ≤ 3 commands each, none single", p, c, one)
	}
	if got := s.renewFailures.Load(); got != 0 {
		t.Errorf("renew failures: got %d, want 0", got)
	}
}

// closeInFlight closes a stream while the first renewal is in flight,
// before Redis has it: the renewal adds the stream back.
type closeInFlight struct {
	roundTrips
	once  atomic.Bool
	close func()
}

func (h *closeInFlight) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if scriptCalls(cmds) && h.once.CompareAndSwap(false, true) {
			h.close()
		}
		return next(ctx, cmds)
	}
}

// TestStreamsCloseDuringRenewal: a stream closed while its renewal is in
// flight leaves no slot behind.
func TestStreamsCloseDuringRenewal(t *testing.T) {
	f := newFakeRedis(t, at10s)
	s := newUnitStreams(t, f, 10)
	openN(t, s, "n", "acc", 0, 3)
	f.rdb.AddHook(&closeInFlight{close: func() { s.Close(context.Background(), "acc", "n-0") }})
	s.renew(context.Background())
	if got, err := f.ZMembers(s.key("acc")); err != nil || !slices.Equal(got, []string{"n-1", "n-2"}) {
		t.Errorf("slots: got %q, %v; want n-1 and n-2 (n-0 closed)", got, err)
	}
}

// TestStreamsFallbackMovedIntoRedis: streams opened while Redis did not
// answer count in Redis after the first renewal once it answers again.
func TestStreamsFallbackMovedIntoRedis(t *testing.T) {
	f := newFakeRedis(t, at10s)
	s := newUnitStreams(t, f, 10)
	openN(t, s, "n", "acc", 0, 3)
	f.Close()
	for i := range 2 {
		if ok, _, err := s.Open(context.Background(), "acc", fmt.Sprintf("down-%d", i)); !ok || err == nil {
			t.Fatalf("open with Redis down: got %v, %v; want allowed by the node, with an error", ok, err)
		}
	}
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	s.renew(context.Background())
	if got := slots(t, f, s, "acc"); got != 5 {
		t.Errorf("slots after renewal: got %d, want 5", got)
	}
}

// TestDefaultStreamsConfig is the contract's limit, and NewStreams takes
// it as it is once the prefix is set.
func TestDefaultStreamsConfig(t *testing.T) {
	cfg := DefaultStreamsConfig()
	if cfg.Limit != 10 || cfg.Lease != unitLease || cfg.Timeout != DefaultTimeout || cfg.Prefix != "" {
		t.Fatalf("DefaultStreamsConfig() = %+v, want Limit 10, Lease %s, Timeout %s, no Prefix", cfg, unitLease, DefaultTimeout)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
}

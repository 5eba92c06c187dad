package clustertest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/marketdata/marketdata/api/stream"
)

// The streams' figures the tests hold the nodes to.
const (
	// streamLimit is how many streams an account may have open across all
	// nodes (contract §3).
	streamLimit = 10
	// streamLease is the lease of a stream's slot in Redis
	// (cmd/marketdata/api.go): each node renews its streams' slots every
	// streamLease/3, adding back those Redis lost.
	streamLease = 15 * time.Second
	// slotFreedBound is how soon a stream its client closes frees its slot
	// for the account on every node.
	slotFreedBound = 3 * time.Second
)

// resync is the streams' safety net under lost change notices: every
// subscribed market is read again this often.
var resync = stream.DefaultConfig().Resync

// streamScopes are the scopes of the stream tests' keys.
const streamScopes = "markets:read,stream:read"

// TestStreamsAcrossNodes: streams on two API nodes of the cluster. One key
// opens the account's 10 streams across both nodes, each subscribed to the
// same markets and given their current prices; the 11th is 429 on either
// node; a stream that closes frees its slot for the other node within 3 s.
// Then price updates published through the NATS cluster reach every stream
// through ingest, Postgres, Redis Cluster and the nodes' change notices:
// each stream ends at every market's newest committed version, no version
// after a newer one, seq without a gap.
func TestStreamsAcrossNodes(t *testing.T) {
	s := cl(t)
	started := time.Now()
	ctx := context.Background()
	w := s.world(t)
	nodes := s.apis[:2]
	_, secret, err := s.newKey(ctx, "clustertest-streams", streamScopes)
	if err != nil {
		t.Fatal(err)
	}
	markets := w.streamed[:4]
	stored := pricedMarkets(t, markets)
	streams := openStreams(t, nodes, secret, streamLimit, markets, stored)
	refusedStream(t, nodes, secret, "the account's 11th stream")

	// The last stream (on the second node) ends; the first node may open one.
	closed := streams[len(streams)-1]
	closed.close()
	closedAt := time.Now()
	var again *streamClient
	for try := 1; again == nil; try++ {
		c, a, err := dialStream(ctx, nodes[0], "stream 10 reopened on "+nodes[0].name, secret)
		switch {
		case err == nil:
			again = c
			t.Cleanup(c.close)
			t.Logf("a closed stream's slot was free on the other node %s after it closed (try %d)", time.Since(closedAt).Round(time.Millisecond), try)
		case a.status != http.StatusTooManyRequests:
			t.Fatalf("%v: %d %s; want 429 until the closed stream's slot is free, then the upgrade", err, a.status, a.body)
		case time.Since(closedAt) > slotFreedBound:
			t.Fatalf("a closed stream's slot was not free on the other node within %s: still 429", slotFreedBound)
		default:
			time.Sleep(50 * time.Millisecond) // polling interval
		}
	}
	again.subscribe(t, markets, stored)
	streams[len(streams)-1] = again
	refusedStream(t, nodes, secret, "the 11th stream once the closed one was replaced")

	pub := startPublisher(t, markets, 20*time.Millisecond)
	waitAcked(t, pub, 200)
	// Every API node serves the last committed versions on the snapshot
	// route; the streams have them by the next resync at the latest.
	s.checkApplied(t, pub)
	final, err := storedVersions(ctx, markets)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitAll(streams, final, time.Now().Add(resync+time.Second)); err != nil {
		t.Fatalf("the newest committed versions %v did not reach every stream within %s of every node serving them:\n%v", final, resync+time.Second, err)
	}
	for _, c := range streams {
		c.check(t)
	}
	published := 0
	for id, v := range final {
		published += int(v - stored[id])
	}
	prices, repeats := received(streams)
	t.Logf("%d price versions of %d markets committed; %d streams on %d nodes took %d price messages (snapshots included, %d repeats)",
		published, len(markets), len(streams), len(nodes), prices, repeats)
	// The change notices, not the resync alone, carried the updates: a
	// stream that keeps up gets (nearly) every version, where the resync
	// alone would give one per market every 2 s.
	for _, c := range streams {
		c.mu.Lock()
		got := c.prices
		c.mu.Unlock()
		if got < published/2 {
			t.Errorf("%s took %d price messages for %d committed versions: the change notices did not carry them", c.name, got, published)
		}
	}
	t.Logf("TestStreamsAcrossNodes took %s", time.Since(started).Round(time.Millisecond))
}

// TestStreamsRedisMasterKilled: the Redis master holding an account's
// stream slots (and some of the streamed markets' documents) is SIGKILLed
// while the account has its 10 streams open on two nodes and prices move.
// No stream ends; a price published after the promotion reaches every
// stream within the 5 s follow bound plus the 2 s resync; the slots Redis
// lost (made certain: the account's slot set is deleted after the
// promotion) are added back by the nodes' lease renewal, so the 11th stream
// is refused again; and every stream ends at the newest committed versions.
func TestStreamsRedisMasterKilled(t *testing.T) {
	s := cl(t)
	started := time.Now()
	ctx := context.Background()
	w := s.world(t)
	nodes := s.apis[:2]
	a := s.streamAccountWithMarkets(t, w.streamed)
	on := a.on[:min(2, len(a.on))]
	markets := slices.Concat(on, a.off[:1])
	t.Logf("killing master 127.0.0.1:%d (the account's slot set and the documents of %v); its replica is 127.0.0.1:%d; %s lives elsewhere",
		a.master.port, on, a.replica.port, a.off[0])
	stored := pricedMarkets(t, markets)
	streams := openStreams(t, nodes, a.secret, streamLimit, markets, stored)
	slots := "md:{st:" + a.account + "}"
	if n, err := clusterClient(t).ZCard(ctx, slots).Result(); err != nil || n != streamLimit {
		t.Fatalf("Redis counts %d open streams of the account (%v), want %d", n, err, streamLimit)
	}
	pub := startPublisher(t, markets, 20*time.Millisecond)
	waitAcked(t, pub, 30)

	killed := time.Now()
	s.clusterT(t, "kill-redis", strconv.Itoa(a.master.port))
	s.restoreAtEnd(t, "start-redis", strconv.Itoa(a.master.port))
	promoted := awaitPromotion(t, a.master, a.replica)
	t.Logf("promotion seen %s after the kill", promoted.Sub(killed).Round(time.Millisecond))

	// Delivery goes on: a version sent after the promotion reaches every
	// stream once the nodes follow the new master (5 s), or by the resync
	// after that.
	after := pub.sentVersions()
	for id := range after {
		after[id]++
	}
	deliveryBound := followBound + resync + time.Second
	if err := waitAll(streams, after, promoted.Add(deliveryBound)); err != nil {
		t.Errorf("a price sent after the promotion did not reach every stream within %s of it:\n%v", deliveryBound, err)
	} else {
		t.Logf("prices sent after the promotion reached every stream %s after it", time.Since(promoted).Round(time.Millisecond))
	}

	// Slots lost with the old master, made certain: the nodes' renewal adds
	// them back (each node renews every streamLease/3, once it follows the
	// new master), and the 11th stream is refused again.
	readded := sumMetric(t, nodes, "marketdata_streams_readded_total")
	dropSlots(t, slots)
	dropped := time.Now()
	rdb := clusterClient(t) // a client of its own: the test's first one may still know the old map
	renewBound := followBound + streamLease/3 + time.Second
	for {
		n, err := rdb.ZCard(ctx, slots).Result()
		if err == nil && n == streamLimit {
			t.Logf("the account's %d slots were added back %s after they were lost", n, time.Since(dropped).Round(time.Millisecond))
			break
		}
		if time.Since(dropped) > renewBound {
			t.Fatalf("%s after the account's slots were lost Redis counts %d of its open streams (%v), want %d added back by the renewal", renewBound, n, err, streamLimit)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	if got := sumMetric(t, nodes, "marketdata_streams_readded_total") - readded; got < streamLimit {
		t.Errorf("the nodes report %v slots added back, want at least the %d lost", got, streamLimit)
	}
	refusedStream(t, nodes, a.secret, "the 11th stream after the failover")

	s.clusterT(t, "start-redis", strconv.Itoa(a.master.port))
	s.clusterT(t, "wait")
	s.checkApplied(t, pub)
	final, err := storedVersions(ctx, markets)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitAll(streams, final, time.Now().Add(resync+time.Second)); err != nil {
		t.Errorf("the newest committed versions %v did not reach every stream within %s of every node serving them:\n%v", final, resync+time.Second, err)
	}
	for _, c := range streams {
		c.check(t)
	}
	_, sent, retries := pub.result()
	prices, repeats := received(streams)
	t.Logf("publisher: %d price updates acknowledged, %d publishes retried; %d streams took %d price messages (%d repeats)",
		sent, retries, len(streams), prices, repeats)
	t.Logf("TestStreamsRedisMasterKilled took %s", time.Since(started).Round(time.Millisecond))
}

// pricedMarkets returns the stored price version of each of markets; a
// market without a price fails the test (its snapshot on subscribe would
// be empty).
func pricedMarkets(t *testing.T, markets []string) map[string]int64 {
	t.Helper()
	stored, err := storedVersions(context.Background(), markets)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range markets {
		if stored[id] == 0 {
			t.Fatalf("market %s has no price in Postgres; the stream tests need markets with one", id)
		}
	}
	return stored
}

// streamAccount is an account with a stream key whose slot set lives on
// master, with the markets whose documents live there too (on) and
// elsewhere (off).
type streamAccount struct {
	account, secret string
	master, replica clusterNode
	on, off         []string
}

// streamAccountWithMarkets creates accounts until one's slot set lives on
// a master that also holds the document of one of markets (and another
// master holds one).
func (s *suite) streamAccountWithMarkets(t *testing.T, markets []string) streamAccount {
	t.Helper()
	ctx := context.Background()
	rdb := clusterClient(t)
	for try := 1; try <= 10; try++ {
		account, secret, err := s.newKey(ctx, fmt.Sprintf("clustertest-streams-failover-%d", try), streamScopes)
		if err != nil {
			t.Fatal(err)
		}
		slot, err := keySlot(ctx, rdb, "md:{st:"+account+"}")
		if err != nil {
			t.Fatal(err)
		}
		master, replica, err := slotOwner(ctx, livePort(ctx, 0), slot)
		if err != nil {
			t.Fatal(err)
		}
		a := streamAccount{account: account, secret: secret, master: master, replica: replica}
		for _, id := range markets {
			ms, err := keySlot(ctx, rdb, "md:{m:"+id+"}")
			if err != nil {
				t.Fatal(err)
			}
			if master.serves(ms) {
				a.on = append(a.on, id)
			} else {
				a.off = append(a.off, id)
			}
		}
		if len(a.on) > 0 && len(a.off) > 0 {
			return a
		}
	}
	t.Fatalf("no account of 10 has its stream slots on a master holding one of %d markets", len(markets))
	return streamAccount{}
}

// serves reports whether the node serves slot.
func (n clusterNode) serves(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// dropSlots deletes an account's slot set, as a failover that lost its
// writes does, retrying while the cluster still fails over.
func dropSlots(t *testing.T, key string) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		// A new client each try: it reads the slot map as it is now.
		rdb := newClusterClient()
		err := rdb.Del(ctx, key).Err()
		rdb.Close()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delete %s: %v", key, err)
		}
		time.Sleep(100 * time.Millisecond) // the cluster is still failing over
	}
}

// sumMetric sums a metric over nodes.
func sumMetric(t *testing.T, nodes []*child, name string) float64 {
	t.Helper()
	sum := 0.0
	for _, n := range nodes {
		v, err := n.metric(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}

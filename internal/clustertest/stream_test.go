package clustertest

import (
	"context"
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
	again := reconnect(t, streams[len(streams)-1], nodes[0], secret)
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
	_, published, _ := pub.result()
	prices, repeats := received(streams)
	t.Logf("%d price versions of %d markets published; %d streams on %d nodes took %d price messages (snapshots included, %d repeats)",
		published, len(markets), len(streams), len(nodes), prices, repeats)
	// The change notices, not the resync alone, carried the updates: a
	// stream that keeps up gets (nearly) every version, where the resync
	// alone would give one per market every 2 s.
	for _, c := range streams {
		c.mu.Lock()
		got := c.prices
		c.mu.Unlock()
		if got < published/2 {
			t.Errorf("%s took %d price messages for %d versions published: the change notices did not carry them", c.name, got, published)
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
// is refused again; a client that reconnects gets the whole state, a
// quiet market's newest version included though Redis lost its write (made
// certain too), and no stream gets that market's older version; every
// stream ends at the newest committed versions.
func TestStreamsRedisMasterKilled(t *testing.T) {
	s := cl(t)
	started := time.Now()
	ctx := context.Background()
	w := s.world(t)
	nodes := s.apis[:2]
	a := s.streamAccountWithMarkets(t, w.streamed)
	// moving receive prices throughout; quiet one before the kill, whose
	// write Redis then loses.
	moving, quiet := slices.Concat(a.on[:2], a.off[:1]), a.on[2]
	subscribed := append(slices.Clone(moving), quiet)
	t.Logf("killing master 127.0.0.1:%d (the account's slot set and the documents of %v); its replica is 127.0.0.1:%d; %s lives elsewhere",
		a.master.port, a.on[:3], a.replica.port, a.off[0])
	stored := pricedMarkets(t, subscribed)
	streams := openStreams(t, nodes, a.secret, streamLimit, subscribed, stored)
	slots, quietDoc := "md:{st:"+a.account+"}", "md:{m:"+quiet+"}"
	first := clusterClient(t)
	if n, err := first.ZCard(ctx, slots).Result(); err != nil || n != streamLimit {
		t.Fatalf("Redis counts %d open streams of the account (%v), want %d", n, err, streamLimit)
	}
	before, err := first.HGetAll(ctx, quietDoc).Result()
	if err != nil || len(before) == 0 {
		t.Fatalf("HGETALL %s: %v %v", quietDoc, before, err)
	}
	quietV := stored[quiet] + 1
	publishPrice(t, quiet, quietV)
	if err := waitAll(streams, map[string]int64{quiet: quietV}, time.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("price of the quiet market before the kill: %v", err)
	}
	pub := startPublisher(t, moving, 20*time.Millisecond)
	waitAcked(t, pub, 30)
	ingestFailures := sumMetric(t, s.ingests, "marketdata_ingest_failures_total")

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
	rewrite(t, slots, nil)
	dropped := time.Now()
	rdb := clusterClient(t) // a client of its own: the first one may still know the old map
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

	// The quiet market's last write lost with the old master, made certain:
	// its document is the one before, and the nodes are told (they read it
	// again). A client that reconnects then still gets the newest version
	// (the node gave it to the others), by the resync after Redis holds it
	// again (anti-entropy) at the latest; no stream gets the older one.
	rewrite(t, quietDoc, before)
	lost := time.Now()
	announce(t, quiet)
	again := reconnect(t, streams[0], nodes[0], a.secret)
	again.subscribe(t, subscribed, nil)
	streams[0] = again
	snapshot := again.version(quiet)
	repaired := waitSnapshot(t, nodes[0], a.secret, quiet, quietV)
	if err := again.waitVersions(map[string]int64{quiet: quietV}, repaired.Add(resync+time.Second)); err != nil {
		t.Errorf("a stream reconnected after Redis lost the quiet market's version %d: %v %s after the snapshot route answers it again", quietV, err, resync+time.Second)
	}
	t.Logf("reconnected after the lost write: snapshot at version %d of %d; Redis held it again %s after it was lost",
		snapshot, quietV, repaired.Sub(lost).Round(time.Millisecond))

	s.clusterT(t, "start-redis", strconv.Itoa(a.master.port))
	s.clusterT(t, "wait")
	s.checkApplied(t, pub)
	final, err := storedVersions(ctx, subscribed)
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
	// A repeat (the same version and fields again) follows a batch ingest
	// applied again: its cache write failed while the shard had no master.
	t.Logf("publisher: %d price updates acknowledged, %d publishes retried; ingest: %v batches failed; %d streams took %d price messages (%d repeats)",
		sent, retries, sumMetric(t, s.ingests, "marketdata_ingest_failures_total")-ingestFailures, len(streams), prices, repeats)
	t.Logf("TestStreamsRedisMasterKilled took %s", time.Since(started).Round(time.Millisecond))
}

// reconnect closes c (after checking what it took) and opens a stream with
// secret on node in its place, as a client that reconnects does: the
// account's limit refuses it (429) until c's slot is free, which must take
// at most slotFreedBound.
func reconnect(t *testing.T, c *streamClient, node *child, secret string) *streamClient {
	t.Helper()
	c.check(t)
	c.close()
	closedAt := time.Now()
	for try := 1; ; try++ {
		again, a, err := dialStream(context.Background(), node, c.name+", reconnected on "+node.name, secret)
		switch {
		case err == nil:
			t.Cleanup(again.close)
			t.Logf("%s: its slot was free for %s %s after it closed (try %d)", c.name, node.name, time.Since(closedAt).Round(time.Millisecond), try)
			return again
		case a.status != http.StatusTooManyRequests:
			t.Fatalf("%v: %d %s; want 429 until the closed stream's slot is free, then the upgrade", err, a.status, a.body)
		case time.Since(closedAt) > slotFreedBound:
			t.Fatalf("%s: its slot was not free for %s within %s of its close: still 429", c.name, node.name, slotFreedBound)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

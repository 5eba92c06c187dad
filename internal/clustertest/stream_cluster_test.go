package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/notice"
)

// What the stream tests read and do to the cluster besides the streams.

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
// a master that also holds the documents of three of markets (and another
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
		if len(a.on) >= 3 && len(a.off) >= 1 {
			return a
		}
	}
	t.Fatalf("no account of 10 has its stream slots on a master holding three of %d markets", len(markets))
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

// rewrite makes key the hash fields (nil: deletes it), as a failover that
// lost the writes after it leaves it, retrying while the cluster still
// fails over.
func rewrite(t *testing.T, key string, fields map[string]string) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		// A new client each try: it reads the slot map as it is now.
		rdb := newClusterClient()
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, key)
			if fields != nil {
				p.HSet(ctx, key, fields)
			}
			return nil
		})
		rdb.Close()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rewrite %s: %v", key, err)
		}
		time.Sleep(100 * time.Millisecond) // the cluster is still failing over
	}
}

// announce publishes the change notice of a market's price item, as the
// writer of its document does: every node drops what it holds of it and
// its streams read it again.
func announce(t *testing.T, market string) {
	t.Helper()
	nc, err := natsConn()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := notice.Publish(nc, notice.ChangeSubject, notice.Change{Markets: []string{market}}.Encode()); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// publishPrice publishes one price version of market and waits until
// JetStream acknowledged it.
func publishPrice(t *testing.T, market string, version int64) {
	t.Helper()
	ctx := context.Background()
	nc, err := natsConn()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(pctx, priceMessage(market, version)); err != nil {
		t.Fatalf("publish price %d of %s: %v", version, market, err)
	}
}

// waitSnapshot waits until node's snapshot route answers version of market
// and returns when it did.
func waitSnapshot(t *testing.T, node *child, secret, market string, version int64) time.Time {
	t.Helper()
	for deadline := time.Now().Add(antiEntropyBound); ; {
		got, err := snapshotVersions(context.Background(), node, secret, []string{market})
		if err == nil && got[market] == version {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the snapshot route answers %s at version %d (%v) %s on, want %d", node.name, market, got[market], err, antiEntropyBound, version)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
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

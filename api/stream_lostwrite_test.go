package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/api/stream"
	"github.com/marketdata/marketdata/internal/notice"
)

// A stream that subscribes after Redis lost a market's newest write (an
// asynchronous replica promoted by a failover) gets the newest committed
// version all the same, by the resync after Redis holds it again at the
// latest: the node's other streams of the market, which had it already,
// do not keep it from the newcomer.
func TestStreamNewcomerAfterLostWrite(t *testing.T) {
	w, nodes, secret, _ := streamWorld(t, 1, 1)
	n := nodes[0]
	doc := w.prefix + "{m:s000}"
	v1 := hashOf(t, w.rdb, doc)

	// A stream of the node has version 2.
	a := n.mustDial(t, secret)
	a.subscribe("s000")
	a.expect("subscribed")
	a.untilPrice("s000", 1, nil)
	streamPrice(t, w, "s000", 2)
	w.applied(t)
	a.untilPrice("s000", 2, nil)
	v2 := hashOf(t, w.rdb, doc)

	// Redis loses the write of version 2: the node serves version 1.
	setHash(t, w.rdb, doc, v1)
	for deadline := time.Now().Add(5 * time.Second); snapshotVersion(t, n, secret, "s000") != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the snapshot route still answers version 2 5 s after Redis lost it")
		}
	}

	// A newcomer subscribes then; Redis holds version 2 again (anti-entropy
	// rewrites the document as it was) and says so.
	b := n.mustDial(t, secret)
	b.subscribe("s000")
	b.expect("subscribed")
	first := b.expect("price")
	setHash(t, w.rdb, doc, v2)
	if err := notice.Publish(w.nc, w.names.NoticeSubject, notice.Change{Markets: []string{"s000"}}.Encode()); err != nil {
		t.Fatal(err)
	}
	repaired := time.Now()
	for deadline := time.Now().Add(5 * time.Second); snapshotVersion(t, n, secret, "s000") != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the snapshot route does not answer version 2 5 s after Redis held it again")
		}
	}
	// The snapshot route answers version 2: the newcomer has it by the
	// next resync.
	bound := stream.DefaultConfig().Resync + time.Second
	got := first.Version
	for deadline := time.Now().Add(bound); got != 2; {
		m, err := b.next(time.Until(deadline))
		if err != nil {
			t.Fatalf("the newcomer is at version %d %s after Redis held version 2 again and the snapshot route answers it (%v); want version 2 within %s",
				got, time.Since(repaired).Round(time.Millisecond), err, bound)
		}
		if m.Type == "price" {
			got = m.Version
		}
	}
	took := time.Since(repaired)
	t.Logf("the newcomer's snapshot was version %d; version 2 %s after Redis held it again", first.Version, took.Round(time.Millisecond))
}

// hashOf reads a Redis hash whole.
func hashOf(t *testing.T, rdb *redis.Client, key string) map[string]string {
	t.Helper()
	h, err := rdb.HGetAll(context.Background(), key).Result()
	if err != nil || len(h) == 0 {
		t.Fatalf("HGETALL %s: %v %v", key, h, err)
	}
	return h
}

// setHash makes a Redis hash exactly h.
func setHash(t *testing.T, rdb *redis.Client, key string, h map[string]string) {
	t.Helper()
	_, err := rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		p.Del(context.Background(), key)
		p.HSet(context.Background(), key, h)
		return nil
	})
	if err != nil {
		t.Fatalf("set %s: %v", key, err)
	}
}

// snapshotVersion is the version the snapshot route answers for id.
func snapshotVersion(t *testing.T, n *node, secret, id string) int64 {
	t.Helper()
	r := n.get(t, "/public/v1/prices/snapshot?ids="+id, secret)
	var s struct {
		Data []struct {
			Version int64 `json:"version"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &s); err != nil || len(s.Data) != 1 {
		t.Fatalf("snapshot of %s: %d %s", id, r.status, r.body)
	}
	return s.Data[0].Version
}

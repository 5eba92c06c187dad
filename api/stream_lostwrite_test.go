package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/notice"
)

// A stream that subscribes after Redis lost a market's newest write (an
// asynchronous replica promoted by a failover) gets the newest committed
// version all the same: the node's price replica, which had it, never takes
// an older revision (a reload merges by revision), so the snapshot route
// and the newcomer's first price show it although Redis holds the older
// one; and once Redis holds it again and a notice names the market, the
// node reads it again from Redis and still shows it.
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

	// Redis loses the write of version 2 (nothing tells the node).
	setHash(t, w.rdb, doc, v1)
	if v := snapshotVersion(t, n, secret, "s000"); v != 2 {
		t.Fatalf("after Redis lost version 2 the snapshot route answers version %d, want 2 (the node's replica)", v)
	}

	// A newcomer subscribes then: its first price is version 2.
	b := n.mustDial(t, secret)
	b.subscribe("s000")
	b.expect("subscribed")
	if first := b.expect("price"); first.Version != 2 {
		t.Fatalf("the newcomer's first price is version %d, want 2", first.Version)
	}

	// Redis holds version 2 again (anti-entropy rewrites the document as
	// it was) and a notice names the market without its item: the node
	// reads it again from Redis, and nothing goes back.
	setHash(t, w.rdb, doc, v2)
	if err := notice.Publish(w.nc, w.names.NoticeSubject, notice.Change{Markets: []string{"s000"}}.Encode()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if v := snapshotVersion(t, n, secret, "s000"); v != 2 {
			t.Fatalf("after the repair notice the snapshot route answers version %d, want 2", v)
		}
	}
	b.quiet(200 * time.Millisecond)
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

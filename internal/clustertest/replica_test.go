package clustertest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReplicaStopped: with the Postgres read replica stopped, every API node
// stays ready (/readyz 200, the replica reported degraded), reads go on, a
// read Redis cannot answer falls back to the primary, and a node started
// meanwhile becomes ready.
func TestReplicaStopped(t *testing.T) {
	s := cl(t)
	started := time.Now()
	ctx := context.Background()
	w := s.world(t)
	rdb := clusterClient(t)
	paths := s.paths(t, w)
	probes := s.agree(t, s.apis, paths)

	s.clusterT(t, "stop-pg-replica")
	s.restoreAtEnd(t, "start-pg-replica")

	// Every node notices and reports the replica degraded, never unready.
	for _, n := range s.apis {
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, body, err := n.readyz(ctx)
			if err != nil {
				t.Fatalf("%s /readyz: %v", n.name, err)
			}
			if code != http.StatusOK {
				t.Fatalf("%s /readyz with the replica down: %d %s, want 200 reporting the replica degraded", n.name, code, body)
			}
			if strings.Contains(body, "degraded") {
				t.Logf("%s /readyz: %s", n.name, strings.TrimSpace(body))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s /readyz still %q 20 s after the replica stopped; want it reported degraded", n.name, body)
			}
			time.Sleep(200 * time.Millisecond) // polling interval
		}
	}

	// Reads go on with the same answers.
	got, diff := s.collect(t, s.apis, paths)
	if diff != "" {
		t.Fatalf("with the replica down: %s", diff)
	}
	for i, p := range probes {
		if got[i].want.body != p.want.body || got[i].want.etag != p.want.etag {
			t.Errorf("%s changed while the replica was down", p.path)
		}
	}

	// An event Redis does not hold (nobody read it before) is read from the
	// primary by every node.
	event := w.events[len(w.events)-1]
	if err := rdb.Del(ctx, "md:{e:"+event+"}").Err(); err != nil {
		t.Fatal(err)
	}
	var fallback []answer
	for _, n := range s.apis {
		a := getT(t, n, "/public/v1/events/"+event, s.secret)
		if a.status != http.StatusOK || !strings.Contains(a.body, `"`+event+`"`) {
			t.Errorf("%s GET /events/%s missing from Redis, replica down: %d %.300s, want 200 from the primary", n.name, event, a.status, a.body)
		}
		fallback = append(fallback, a)
	}

	// A node starts while the replica is down.
	extra, err := s.startAPI(ctx, "api-replica-down", []string{"MD_RATE_LIMIT=1000000"})
	if err != nil {
		t.Fatalf("an API node started while the replica is down: %v", err)
	}
	extra.stop(10 * time.Second)

	s.clusterT(t, "start-pg-replica")
	s.clusterT(t, "wait")
	// Back: every node reports the replica up again.
	for _, n := range s.apis {
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body, err := n.readyz(ctx)
			if err == nil && code == http.StatusOK && !strings.Contains(body, "degraded") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s /readyz 30 s after the replica came back: %d %s %v", n.name, code, body, err)
			}
			time.Sleep(200 * time.Millisecond) // polling interval
		}
	}
	// What the nodes served from the primary is what they serve now.
	after, diff := s.collect(t, s.apis, []string{"/public/v1/events/" + event})
	if diff != "" {
		t.Fatal(diff)
	}
	for i, a := range fallback {
		if a.status == http.StatusOK && a.body != after[0].want.body {
			t.Errorf("%s served %s from the primary as %.300s, now %.300s", s.apis[i].name, event, a.body, after[0].want.body)
		}
	}
	t.Logf("TestReplicaStopped took %s", time.Since(started).Round(time.Millisecond))
}

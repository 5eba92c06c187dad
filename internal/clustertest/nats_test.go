package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/ingest"
)

// streamInfo asks the cluster for the MARKETDATA stream's state.
func streamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	nc, err := natsConn()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, ingest.DefaultStream)
	if err != nil {
		return nil, err
	}
	return st.Info(ctx)
}

// TestNATSStreamLeaderKilled: the server leading the R3 stream is SIGKILLed
// while a matcher publishes; ingest goes on, and every version JetStream
// acknowledged is applied (Postgres and every API node hold it).
func TestNATSStreamLeaderKilled(t *testing.T) {
	s := cl(t)
	started := time.Now()
	ctx := context.Background()
	w := s.world(t)

	info, err := streamInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.Config.Replicas, 3; got != want {
		t.Errorf("stream MARKETDATA has %d replicas, want %d (ingest --replicas 3 / MD_STREAM_REPLICAS=3)", got, want)
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("stream MARKETDATA reports no cluster leader: %+v", info.Cluster)
	}
	leader := info.Cluster.Leader
	t.Logf("stream leader %s, replicas %d", leader, info.Config.Replicas)

	pub := startPublisher(t, w.churnNATS, 20*time.Millisecond)
	waitAcked(t, pub, 200)

	killed := time.Now()
	s.clusterT(t, "kill-nats", leader)
	s.restoreAtEnd(t, "start-nats", leader)

	var newLeader string
	for deadline := time.Now().Add(60 * time.Second); ; {
		if info, err := streamInfo(ctx); err == nil && info.Cluster != nil && info.Cluster.Leader != "" && info.Cluster.Leader != leader {
			newLeader = info.Cluster.Leader
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new stream leader within 60 s of killing %s", leader)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	t.Logf("new stream leader %s, %s after the kill", newLeader, time.Since(killed).Round(time.Millisecond))
	waitAcked(t, pub, 200)
	pub.finish()
	_, sent, retries := pub.result()
	t.Logf("publisher: %d price updates acknowledged, %d publishes retried", sent, retries)
	for _, c := range s.ingests {
		if err := c.alive(); err != nil {
			t.Fatal(err)
		}
	}
	s.checkApplied(t, pub)

	s.clusterT(t, "start-nats", leader)
	s.clusterT(t, "wait")
	t.Logf("TestNATSStreamLeaderKilled took %s", time.Since(started).Round(time.Millisecond))
}

// waitAcked waits until the publisher has n more acknowledged messages.
func waitAcked(t *testing.T, p *publisher, n int) {
	t.Helper()
	_, sent, _ := p.result()
	target := sent + n
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, sent, retries := p.result()
		if sent >= target {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Sprintf("publisher: %d acknowledged in 60 s, want %d (%d retries)", sent, target, retries))
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

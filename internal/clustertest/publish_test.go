package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/ingest"
)

// publisher sends price updates for a set of markets, one version after
// another, as an upstream matcher does: each message is retried (same
// Nats-Msg-Id) until JetStream acknowledges it, and the highest acknowledged
// version of every market is kept.
type publisher struct {
	markets []string
	base    int64
	pause   time.Duration

	mu    sync.Mutex
	acked map[string]int64
	// tried is the highest version sent per market: one above acked when a
	// publish was cut off by stop (JetStream may have stored it).
	tried   map[string]int64
	sent    int
	retries int
	stop    context.CancelFunc
	done    chan struct{}
}

// startPublisher publishes to markets from a version above every stored
// one up, pausing between messages, until stop.
func startPublisher(t *testing.T, markets []string, pause time.Duration) *publisher {
	t.Helper()
	stored, err := storedVersions(context.Background(), markets)
	if err != nil {
		t.Fatal(err)
	}
	var base int64
	for _, v := range stored {
		base = max(base, v)
	}
	nc, err := natsConn()
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &publisher{markets: markets, base: base, pause: pause, acked: map[string]int64{}, tried: map[string]int64{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer nc.Close()
		p.run(ctx, js)
	}()
	t.Cleanup(p.finish)
	return p
}

func (p *publisher) run(ctx context.Context, js jetstream.JetStream) {
	for v := p.base + 1; ; v++ {
		for _, m := range p.markets {
			msg := priceMessage(m, v)
			p.mu.Lock()
			p.tried[m] = v
			p.mu.Unlock()
			for {
				if ctx.Err() != nil {
					return
				}
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := js.PublishMsg(pctx, msg)
				cancel()
				if err == nil {
					break
				}
				p.mu.Lock()
				p.retries++
				p.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			p.mu.Lock()
			p.acked[m] = v
			p.sent++
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.pause):
		}
	}
}

// finish stops publishing and waits for the last publish to settle.
func (p *publisher) finish() {
	p.stop()
	<-p.done
}

// result returns the highest acknowledged version per market, the messages
// acknowledged and the publishes that had to be retried.
func (p *publisher) result() (map[string]int64, int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.acked), p.sent, p.retries
}

// sentVersions returns the highest version sent per market.
func (p *publisher) sentVersions() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.tried)
}

func priceMessage(market string, version int64) *nats.Msg {
	body, _ := json.Marshal(map[string]any{
		"market_id": market,
		"version":   version,
		"ts":        time.Now().UTC().Format(time.RFC3339Nano),
		"quotes": map[string]any{
			"venue_a": map[string]float64{"bid": 0.41, "ask": 0.43, "last": 0.42, "volume_24h": float64(version % 100000)},
		},
	})
	msg := nats.NewMsg(ingest.DefaultSubjectPrefix + ".price." + market)
	msg.Data = body
	msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("clustertest.price.%s.%d", market, version))
	return msg
}

// storedVersions reads the price versions of markets from the primary.
func storedVersions(ctx context.Context, markets []string) (map[string]int64, error) {
	conn, err := pgx.Connect(ctx, pgURL(pgPrimaryPort))
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT market_id, version FROM prices WHERE market_id = ANY($1)`, markets)
	if err != nil {
		return nil, err
	}
	got := map[string]int64{}
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return nil, err
		}
		got[id] = v
	}
	return got, rows.Err()
}

// checkApplied checks that Postgres holds, for each market, the highest
// version JetStream acknowledged (or the one sent after it, cut off by stop
// after JetStream stored it), and waits until every API node serves that.
func (s *suite) checkApplied(t *testing.T, p *publisher) {
	t.Helper()
	p.finish()
	acked, _, _ := p.result()
	tried := p.sentVersions()
	ctx := context.Background()
	if err := s.quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for id := range acked {
		ids = append(ids, id)
	}
	stored, err := storedVersions(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for id, v := range acked {
		if stored[id] < v || stored[id] > tried[id] {
			lost++
			if lost <= 5 {
				t.Errorf("market %s: Postgres holds price version %d, want the last acknowledged %d (or %d, sent when publishing stopped)", id, stored[id], v, tried[id])
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d markets lost acknowledged price versions in Postgres", lost, len(acked))
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range s.apis {
		for {
			got, err := snapshotVersions(ctx, n, s.secret, ids)
			bad := ""
			if err == nil {
				// Postgres again: after a stream leader change a message the
				// consumer had counted as done can still be delivered again
				// and applied (a later version, acknowledged before), after
				// the first read above. The snapshot must match Postgres now.
				stored, err = storedVersions(ctx, ids)
			}
			if err != nil {
				bad = err.Error()
			} else {
				for id, v := range stored {
					if got[id] != v {
						bad = fmt.Sprintf("market %s: snapshot version %d, want %d", id, got[id], v)
						break
					}
				}
			}
			if bad == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", n.name, bad)
			}
			time.Sleep(200 * time.Millisecond) // polling interval
		}
	}
}

// replicaCaughtUp waits until the replica has replayed everything the
// primary has written so far.
func replicaCaughtUp(ctx context.Context) error {
	primary, err := pgx.Connect(ctx, pgURL(pgPrimaryPort))
	if err != nil {
		return err
	}
	defer primary.Close(ctx)
	var lsn string
	if err := primary.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		return err
	}
	replica, err := pgx.Connect(ctx, strings.Replace(pgURL(pgReplicaPort), "/marketdata?", "/postgres?", 1))
	if err != nil {
		return err
	}
	defer replica.Close(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var done bool
		if err := replica.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replica has not replayed the primary's WAL up to %s within 30 s", lsn)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

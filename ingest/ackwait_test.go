package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/ingest/feed"
)

// TestEnsureConsumerLowersAckWait: a consumer an older release made with a
// 30 s ack wait is updated in place (nats-server 2.9 allows it), and a
// message delivered under the old wait comes back within the new one.
func TestEnsureConsumerLowersAckWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	old := e.cfg
	old.AckWait = 30 * time.Second
	cons, err := ingest.EnsureConsumer(ctx, e.js, old)
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, e.subject(ingest.KindTrade, "MK-1"), tradeJSON("T-1"), "t1")
	if got := fetchUnacked(t, cons, 5*time.Second); got != 1 {
		t.Fatalf("first delivery: got %d deliveries, want 1", got)
	}
	updated := time.Now()

	e.cfg.AckWait = time.Second
	if cons, err = ingest.EnsureConsumer(ctx, e.js, e.cfg); err != nil {
		t.Fatalf("update to a 1 s ack wait: %v", err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.Config.AckWait != time.Second {
		t.Fatalf("ack wait after the update: got %s, want 1s", ci.Config.AckWait)
	}
	if got := fetchUnacked(t, cons, 10*time.Second); got != 2 {
		t.Fatalf("redelivery: got delivery %d within 10 s, want the second", got)
	}
	if d := time.Since(updated); d > 4*time.Second {
		t.Errorf("redelivered %s after the update, want within the new 1 s ack wait (4 s with slack)", d.Round(time.Millisecond))
	}
}

// fetchUnacked takes one message from cons within wait, leaves it
// unacknowledged (JetStream redelivers it after the ack wait) and returns
// how often it was delivered (0: none came).
func fetchUnacked(t *testing.T, cons jetstream.Consumer, wait time.Duration) uint64 {
	t.Helper()
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for m := range b.Messages() {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		n = md.NumDelivered
	}
	return n
}

// seedPrices publishes a small world, waits until it is applied, and
// returns a newer price message for each of n of its markets.
func (e *env) seedPrices(t *testing.T, n int) []feed.Msg {
	t.Helper()
	world := feed.NewGenerator(feed.GenConfig{Events: 20, Seed: 5, SubjectPrefix: e.cfg.SubjectPrefix}).Initial()
	publishAll(t, e.js, world, 0)
	e.waitDrained(t, 60*time.Second)
	var out []feed.Msg
	for _, m := range world {
		if u, err := ingest.Decode(e.cfg.SubjectPrefix, m.Subject, m.Data); err != nil || u.Price == nil {
			continue
		}
		var p ingest.PriceMsg
		if err := json.Unmarshal(m.Data, &p); err != nil {
			t.Fatal(err)
		}
		v := *p.Version + 1000
		p.Version = &v
		out = append(out, feed.Msg{Subject: m.Subject, Data: mustJSON(t, p), MsgID: m.MsgID + ".newer"})
		if len(out) == n {
			return out
		}
	}
	t.Fatalf("the world has %d prices, want %d", len(out), n)
	return nil
}

// checkPrices checks that Postgres holds each of msgs' versions.
func (e *env) checkPrices(t *testing.T, msgs []feed.Msg) {
	t.Helper()
	for _, m := range msgs {
		u, err := ingest.Decode(e.cfg.SubjectPrefix, m.Subject, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		var v int64
		if err := e.pool.QueryRow(context.Background(), `SELECT version FROM prices WHERE market_id = $1`, u.Price.MarketID).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != u.Price.Version {
			t.Errorf("price of %s: version %d stored, want %d", u.Price.MarketID, v, u.Price.Version)
		}
	}
}

// consumerInfo is the consumer's state now.
func (e *env) consumerInfo(t *testing.T) *jetstream.ConsumerInfo {
	t.Helper()
	ctx := context.Background()
	c, err := e.js.Consumer(ctx, e.cfg.Stream, e.cfg.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ci
}

// lastSeq is the stream's last sequence.
func (e *env) lastSeq(t *testing.T) uint64 {
	t.Helper()
	s, err := e.js.Stream(context.Background(), e.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// pricesHandled counts the price messages the worker of m has applied,
// ignored or rejected.
func pricesHandled(t *testing.T, m *ingest.Metrics) float64 {
	t.Helper()
	var n float64
	for _, outcome := range []string{ingest.OutcomeApplied, ingest.OutcomeIgnored, ingest.OutcomeRejected} {
		n += counterValue(t, m.Messages.WithLabelValues(ingest.KindPrice, outcome))
	}
	return n
}

// lockPrices holds the price rows of msgs (all of them: nil) in a
// transaction of its own until the returned release is called (or the test
// ends).
func (e *env) lockPrices(t *testing.T, msgs []feed.Msg) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release = func() {
		if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			t.Error(err)
		}
	}
	t.Cleanup(release)
	lock := func(sql string, args ...any) {
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	if msgs == nil {
		lock(`LOCK TABLE prices IN EXCLUSIVE MODE`)
	}
	for _, m := range msgs {
		u, err := ingest.Decode(e.cfg.SubjectPrefix, m.Subject, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		lock(`SELECT 1 FROM prices WHERE market_id = $1 FOR UPDATE`, u.Price.MarketID)
	}
	return release
}

// waitLockWait waits until a session of the test's database waits on a lock.
func (e *env) waitLockWait(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, "an applier waits on the locked rows", func() error {
		var n int
		err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		if err == nil && n == 0 {
			err = errors.New("no session waits on a lock")
		}
		return err
	})
}

// TestSlowBatchNotRedelivered: a batch that waits three ack waits on a row
// another transaction holds is not redelivered meanwhile (the worker's
// progress acks restart its messages' ack timers), and each of its messages
// is delivered and handled once.
func TestSlowBatchNotRedelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.AckWait = 2 * time.Second
	m := ingest.NewMetrics(prometheus.NewRegistry())
	e.startWorkerMetrics(t, m)
	prices := e.seedPrices(t, 10)
	delivered, handled := e.consumerInfo(t).Delivered.Consumer, pricesHandled(t, m)

	release := e.lockPrices(t, prices[:1])
	publishAll(t, e.js, prices, 0)
	e.waitLockWait(t)
	blocked := time.Now()
	// Three ack waits: fail at the first redelivery.
	for time.Since(blocked) < 3*e.cfg.AckWait {
		ci := e.consumerInfo(t)
		if ci.NumRedelivered > 0 || ci.Delivered.Consumer > delivered+uint64(len(prices)) {
			t.Fatalf("%s into the hold: %d messages redelivered, %d deliveries of %d messages",
				time.Since(blocked).Round(time.Millisecond), ci.NumRedelivered, ci.Delivered.Consumer-delivered, len(prices))
		}
		if ci.NumAckPending == 0 {
			t.Fatal("every message was acknowledged while a row it needs was locked")
		}
		time.Sleep(50 * time.Millisecond)
	}
	release()
	e.waitDrained(t, 30*time.Second)

	if got := e.consumerInfo(t).Delivered.Consumer - delivered; got != uint64(len(prices)) {
		t.Errorf("deliveries: got %d for %d messages, want one each", got, len(prices))
	}
	if got := pricesHandled(t, m) - handled; got != float64(len(prices)) {
		t.Errorf("price messages handled: got %v, want %d (each once)", got, len(prices))
	}
	if got := counterValue(t, m.ProgressAcks); got == 0 {
		t.Error("no progress ack was sent for a batch held three ack waits")
	}
	e.checkPrices(t, prices)
}

// TestSIGKILLInFlightBack: the messages a SIGKILLed worker held (its batches
// wait on Postgres) are applied by the surviving worker within the ack wait
// of the kill, plus slack; with JetStream's 30 s default they waited half a
// minute. While the victim lived, none was redelivered to the survivor.
func TestSIGKILLInFlightBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const ackWait = 2 * time.Second
	victim := e.startProcess(t, "victim", "--ack-wait", ackWait.String())
	prices := e.seedPrices(t, 50)

	release := e.lockPrices(t, nil)
	publishAll(t, e.js, prices, 0)
	e.waitLockWait(t)
	last := e.lastSeq(t)
	eventually(t, 10*time.Second, "every new price delivered to the victim", func() error {
		if ci := e.consumerInfo(t); ci.NumPending > 0 || ci.NumAckPending != len(prices) {
			return fmt.Errorf("%d undelivered, %d delivered and not acknowledged; want 0, %d", ci.NumPending, ci.NumAckPending, len(prices))
		}
		return nil
	})
	e.startProcess(t, "survivor", "--ack-wait", ackWait.String())
	ci := e.consumerInfo(t)
	if ci.NumAckPending != len(prices) || ci.NumRedelivered != 0 || ci.AckFloor.Stream >= last {
		t.Fatalf("before the kill: %d messages in flight, %d redelivered, ack floor %d; want %d, 0, below %d",
			ci.NumAckPending, ci.NumRedelivered, ci.AckFloor.Stream, len(prices), last)
	}
	if err := victim.Alive(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	victim.Stop(syscall.SIGKILL, time.Minute) //nolint:errcheck // killed on purpose: the exit status reports the SIGKILL
	release()
	e.waitAcked(t, last, 60*time.Second)
	took := time.Since(killed)
	t.Logf("SIGKILL → the victim's %d in-flight messages applied by the survivor: %s (ack wait %s)", len(prices), took.Round(time.Millisecond), ackWait)
	if bound := ackWait + 3*time.Second; took > bound {
		t.Errorf("the victim's messages were applied %s after the kill, want within %s", took.Round(time.Millisecond), bound)
	}
	e.checkPrices(t, prices)
}

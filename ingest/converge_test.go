package ingest_test

import (
	"context"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/ingest/feed"
	"github.com/marketdata/marketdata/internal/servicetest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// stream is a synthetic matcher stream with duplicates and reordering, and the
// final state it must converge to.
type stream struct {
	msgs []feed.Msg
	// want maps "<kind>:<key>" to the highest version published (0 for trades).
	want map[string]int64
}

// messyStream builds a feed world and publishes its changes out of order
// (shuffled in windows of 40), with 10% of messages sent again later under a
// new message id, so that JetStream does not drop them as duplicates.
func messyStream(t *testing.T, prefix string, events, changes int, seed uint64) stream {
	t.Helper()
	g := feed.NewGenerator(feed.GenConfig{Events: events, Seed: seed, SubjectPrefix: prefix})
	msgs := g.Initial()
	for range changes {
		msgs = append(msgs, g.Next())
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < len(msgs); i += 40 {
		w := msgs[i:min(i+40, len(msgs))]
		rng.Shuffle(len(w), func(a, b int) { w[a], w[b] = w[b], w[a] })
	}
	out := make([]feed.Msg, 0, len(msgs)*11/10)
	for i, m := range msgs {
		out = append(out, m)
		if rng.IntN(10) == 0 && i > 0 {
			old := msgs[rng.IntN(i)]
			old.MsgID += ".replay"
			out = append(out, old)
		}
	}
	s := stream{msgs: out, want: map[string]int64{}}
	for _, m := range out {
		u, err := ingest.Decode(prefix, m.Subject, m.Data)
		if err != nil {
			t.Fatalf("generator produced an invalid message %s: %v", m.Subject, err)
		}
		key := u.Kind + ":" + u.Key()
		var v int64
		switch {
		case u.Event != nil:
			v = u.Event.Version
		case u.Market != nil:
			v = u.Market.Version
		case u.Price != nil:
			v = u.Price.Version
		}
		s.want[key] = max(s.want[key], v)
	}
	return s
}

// publishAll sends the stream asynchronously, pacing at rate messages/s (0 =
// as fast as possible), and waits for every acknowledgement.
func publishAll(t *testing.T, js jetstream.JetStream, msgs []feed.Msg, rate float64) {
	t.Helper()
	start := time.Now()
	for i, m := range msgs {
		msg := nats.NewMsg(m.Subject)
		msg.Data = m.Data
		msg.Header.Set(jetstream.MsgIDHeader, m.MsgID)
		if _, err := js.PublishMsgAsync(msg); err != nil {
			t.Fatalf("publish: %v", err)
		}
		if rate > 0 && i%50 == 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publish acknowledgements did not complete")
	}
}

// verify checks Postgres against the expected versions and Redis against a
// rebuild from Postgres into a second prefix: nothing lost, nothing stale.
func (e *env) verify(t *testing.T, s stream) {
	t.Helper()
	ctx := context.Background()
	got := map[string]int64{}
	for _, q := range []struct{ kind, sql string }{
		{"event", `SELECT universal_id, version FROM events`},
		{"market", `SELECT universal_id, version FROM markets`},
		{"price", `SELECT market_id, version FROM prices`},
		{"trade", `SELECT trade_id, 0 FROM trades`},
	} {
		rows, err := e.pool.Query(ctx, q.sql)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			var v int64
			if err := rows.Scan(&id, &v); err != nil {
				t.Fatal(err)
			}
			got[q.kind+":"+id] = v
		}
	}
	bad := 0
	for k, v := range s.want {
		if gv, ok := got[k]; !ok || gv != v {
			if bad++; bad <= 5 {
				t.Errorf("%s: stored version %d (present %v), want %d", k, gv, ok, v)
			}
		}
	}
	if len(got) != len(s.want) {
		t.Errorf("stored %d entities, want %d", len(got), len(s.want))
	}

	incremental := dump(t, e.rdb, e.prefix)
	rebuiltPrefix := e.prefix + "rebuilt:"
	t.Cleanup(func() {
		keys, _ := e.rdb.Keys(context.Background(), rebuiltPrefix+"*").Result()
		if len(keys) > 0 {
			e.rdb.Del(context.Background(), keys...)
		}
	})
	if _, err := cache.New(e.rdb, rebuiltPrefix, e.rules).Rebuild(ctx, e.st); err != nil {
		t.Fatal(err)
	}
	rebuilt := dump(t, e.rdb, rebuiltPrefix)
	// The incremental dump also saw the rebuilt keys (they share the prefix).
	for k := range incremental {
		if len(k) >= len("rebuilt:") && k[:len("rebuilt:")] == "rebuilt:" {
			delete(incremental, k)
		}
	}
	if len(rebuilt) < 10 {
		t.Fatalf("rebuild wrote only %d keys", len(rebuilt))
	}
	diffDumps(t, incremental, rebuilt)
}

// TestConvergeTwoWorkers: two workers on one consumer, a stream with
// duplicates and reordering: the final state is the highest version of
// everything, and Redis equals a rebuild from Postgres byte for byte.
func TestConvergeTwoWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := messyStream(t, e.cfg.SubjectPrefix, 40, 4000, 11)
	e.startWorker(t)
	e.startWorker(t)
	publishAll(t, e.js, s.msgs, 0)
	e.waitDrained(t, 60*time.Second)
	e.verify(t, s)
}

// startProcess runs `marketdata ingest` as a child process on the test's
// database, prefix and streams, and waits until its /readyz answers 200;
// the test's end stops it (SIGTERM), and a failed test shows its log.
// Flags in more come last and override the defaults here.
func (e *env) startProcess(t *testing.T, name string, more ...string) *servicetest.Proc {
	t.Helper()
	var log testenv.LogBuffer
	p, err := servicetest.StartProc(servicetest.ProcOptions{
		Name: name, Bin: servicetest.Binary(t), Log: &log,
		Args: append([]string{"ingest",
			"--stream", e.cfg.Stream, "--subject-prefix", e.cfg.SubjectPrefix,
			"--dlq-stream", e.cfg.DLQStream, "--dlq-prefix", e.cfg.DLQPrefix,
			"--notice-subject", e.cfg.NoticeSubject, "--consumer", e.cfg.Consumer,
			"--batch-size", "200", "--ack-wait", "3s"}, more...),
		Env: append(os.Environ(),
			"MD_DATABASE_URL="+e.dsn, "MD_REDIS_PREFIX="+e.prefix, "MD_ADMIN_ADDR=127.0.0.1:0",
			"MD_REDIS_URL="+testenv.RedisURL, "MD_NATS_URL="+testenv.NATSURL,
		),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(syscall.SIGTERM, time.Minute) //nolint:errcheck // how it exited is not under test (the victim was killed); its log is shown on failure
		if t.Failed() {
			t.Logf("%s log:\n%.3000s", name, log.String())
		}
	})
	if err := p.Start(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitAcked waits until the consumer's ack floor reaches stream sequence n.
func (e *env) waitAcked(t *testing.T, n uint64, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		c, err := e.js.Consumer(ctx, e.cfg.Stream, e.cfg.Consumer)
		if err == nil {
			if ci, err := c.Info(ctx); err == nil && ci.AckFloor.Stream >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer's ack floor did not reach %d within %s", n, timeout)
		}
	}
}

// TestSIGKILLMidStream: two `marketdata ingest` processes share the consumer;
// one is killed with SIGKILL while the stream flows, then restarted. Nothing
// is lost and nothing is stale.
func TestSIGKILLMidStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := messyStream(t, e.cfg.SubjectPrefix, 40, 6000, 23)
	victim := e.startProcess(t, "victim")
	e.startProcess(t, "survivor")

	done := make(chan struct{})
	go func() {
		defer close(done)
		publishAll(t, e.js, s.msgs, 3000)
	}()
	// Mid-stream: the two have applied a sixth of it, the rest is coming.
	e.waitAcked(t, uint64(len(s.msgs)/6), 30*time.Second)
	if err := victim.Alive(); err != nil {
		t.Fatal(err)
	}
	victim.Stop(syscall.SIGKILL, time.Minute) //nolint:errcheck // killed on purpose: the exit status reports the SIGKILL
	e.startProcess(t, "restarted")
	<-done
	// Messages the victim held wait for their ack deadline (3 s here).
	e.waitDrained(t, 60*time.Second)
	e.verify(t, s)
}

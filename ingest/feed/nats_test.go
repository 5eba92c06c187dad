package feed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/internal/testenv"
)

// testNATSURL is the local NATS, or where MD_TEST_NATS_URL points.
var testNATSURL = testenv.NATSURL

// testStream connects to the local NATS and creates a stream of its own under
// a unique subject prefix; both go away when the test ends. Without NATS the
// test is skipped, except on CI (CI=true), where it fails.
func testStream(t *testing.T) (js jetstream.JetStream, stream jetstream.Stream, prefix string) {
	t.Helper()
	testenv.Integration(t, "NATS")
	nc, err := nats.Connect(testNATSURL, nats.Timeout(2*time.Second))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS at %s is required on CI: %v", testNATSURL, err)
		}
		t.Skipf("NATS at %s is unreachable (%v); start it to run this test", testNATSURL, err)
	}
	t.Cleanup(nc.Close)
	js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	tag := hex.EncodeToString(b[:])
	name, prefix := "FEEDTEST_"+strings.ToUpper(tag), "feedtest"+tag+".updates"

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     name,
		Subjects: []string{prefix + ".>"},
		Storage:  jetstream.MemoryStorage,
	})
	if err != nil {
		if os.Getenv("CI") != "true" && strings.Contains(err.Error(), "not enabled") {
			t.Skipf("JetStream is not enabled on %s: %v", testNATSURL, err)
		}
		t.Fatalf("create stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
	})
	return js, stream, prefix
}

// streamMsgs returns how many messages the stream holds.
func streamMsgs(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Msgs
}

func TestRunAgainstJetStream(t *testing.T) {
	js, stream, prefix := testStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clock := func() func() time.Time { return stepClock(t, testEpoch, time.Millisecond) }
	g := NewGenerator(GenConfig{Events: 50, Seed: 7, SubjectPrefix: prefix, Now: clock()})
	initial := len(g.Initial())
	var want uint64

	runs := []struct {
		name         string
		opts         RunOptions
		minEl, maxEl time.Duration
	}{
		{"initial state then changes, unpaced", RunOptions{MaxMessages: 2000}, 0, 30 * time.Second},
		{"500 at 1,000/s", RunOptions{Rate: 1000, MaxMessages: 500, SkipInitial: true}, 400 * time.Millisecond, 1500 * time.Millisecond},
		{"2,500 at 5,000/s", RunOptions{Rate: 5000, MaxMessages: 2500, SkipInitial: true}, 400 * time.Millisecond, 1500 * time.Millisecond},
	}
	for _, r := range runs {
		st, err := Run(ctx, js, g, r.opts)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		t.Logf("%s: %+v", r.name, st)
		if st.Published != int64(r.opts.MaxMessages) || st.Failed != 0 {
			t.Fatalf("%s: stats %+v, want %d published and none failed", r.name, st, r.opts.MaxMessages)
		}
		if st.Elapsed < r.minEl || st.Elapsed > r.maxEl {
			t.Errorf("%s: took %v, want %v..%v", r.name, st.Elapsed, r.minEl, r.maxEl)
		}
		want += uint64(r.opts.MaxMessages)
		if got := streamMsgs(t, stream); got != want {
			t.Fatalf("after %s: stream holds %d messages, want %d", r.name, got, want)
		}
	}

	// The same world republished carries the same Nats-Msg-Ids: JetStream
	// acknowledges every message but stores none of them again.
	twin := NewGenerator(GenConfig{Events: 50, Seed: 7, SubjectPrefix: prefix, Now: clock()})
	st, err := Run(ctx, js, twin, RunOptions{MaxMessages: initial})
	if err != nil {
		t.Fatalf("republish: %v", err)
	}
	if st.Published != int64(initial) || st.Failed != 0 {
		t.Errorf("republish: stats %+v, want %d published and none failed", st, initial)
	}
	if got := streamMsgs(t, stream); got != want {
		t.Errorf("after republishing: stream holds %d messages, want still %d", got, want)
	}
}

package feed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/internal/testenv"
)

// fakeJS is an asyncPublisher whose futures settle at once, unless hang is set.
type fakeJS struct {
	mu        sync.Mutex
	sent      []*nats.Msg
	calls     int
	refuse    map[int]error // PublishMsgAsync call number (from 1) → error
	failEvery int           // every failEvery-th accepted message is nacked
	hang      bool          // futures never settle
}

type fakeFuture struct {
	ok  chan *jetstream.PubAck
	err chan error
	msg *nats.Msg
}

func (f *fakeFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *fakeFuture) Err() <-chan error            { return f.err }
func (f *fakeFuture) Msg() *nats.Msg               { return f.msg }

func (js *fakeJS) PublishMsgAsync(m *nats.Msg, _ ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.calls++
	if err := js.refuse[js.calls]; err != nil {
		return nil, err
	}
	js.sent = append(js.sent, m)
	f := &fakeFuture{ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1), msg: m}
	switch {
	case js.hang:
	case js.failEvery > 0 && len(js.sent)%js.failEvery == 0:
		f.err <- errors.New("nats: stream storage full")
	default:
		f.ok <- &jetstream.PubAck{Stream: "FAKE", Sequence: uint64(len(js.sent))}
	}
	return f, nil
}

func (js *fakeJS) PublishAsyncPending() int { return 0 }

func (js *fakeJS) PublishAsyncComplete() <-chan struct{} {
	ch := make(chan struct{})
	if !js.hang {
		close(ch)
	}
	return ch
}

func (js *fakeJS) messages() []*nats.Msg {
	js.mu.Lock()
	defer js.mu.Unlock()
	return append([]*nats.Msg(nil), js.sent...)
}

// checkSame fails unless the published messages are want, in order, each
// with its MsgID as Nats-Msg-Id.
func checkSame(t *testing.T, got []*nats.Msg, want []Msg) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("published %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Subject != want[i].Subject || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("message %d: got %s, want %s", i, got[i].Subject, want[i].Subject)
		}
		if id := got[i].Header.Get(jetstream.MsgIDHeader); id != want[i].MsgID {
			t.Fatalf("message %d: Nats-Msg-Id %q, want %q", i, id, want[i].MsgID)
		}
	}
}

func TestRunPublishesInitialThenChanges(t *testing.T) {
	tests := []struct {
		name        string
		max         int
		skipInitial bool
	}{
		{"limit inside the initial state", 10, false},
		{"initial state then changes", 0, false}, // max set below to initial+50
		{"changes only", 40, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, twin := newTestGenerator(t, 5, 3), newTestGenerator(t, 5, 3)
			var want []Msg
			if !tt.skipInitial {
				want = twin.Initial()
			}
			if tt.max == 0 {
				tt.max = len(want) + 50
			}
			for len(want) < tt.max {
				want = append(want, twin.Next())
			}
			want = want[:tt.max]

			js := &fakeJS{}
			st, err := run(context.Background(), js, g, RunOptions{MaxMessages: tt.max, SkipInitial: tt.skipInitial})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if st.Published != int64(tt.max) || st.Failed != 0 {
				t.Errorf("stats = %+v, want %d published, 0 failed", st, tt.max)
			}
			checkSame(t, js.messages(), want)
		})
	}
}

func TestRunCountsFailures(t *testing.T) {
	tests := []struct {
		name          string
		js            *fakeJS
		wantPublished int64
		wantFailed    int64
		wantErr       error
	}{
		{"every 4th nacked", &fakeJS{failEvery: 4}, 75, 25, nil},
		{"one refused", &fakeJS{refuse: map[int]error{3: nats.ErrMaxPayload}}, 99, 1, nil},
		{"stalls are retried", &fakeJS{refuse: map[int]error{2: jetstream.ErrTooManyStalledMsgs, 3: jetstream.ErrTooManyStalledMsgs}}, 100, 0, nil},
		{"closed connection ends the run", &fakeJS{refuse: map[int]error{5: nats.ErrConnectionClosed}}, 4, 1, nats.ErrConnectionClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := run(context.Background(), tt.js, newTestGenerator(t, 5, 1), RunOptions{MaxMessages: 100})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("run error = %v, want %v", err, tt.wantErr)
			}
			if st.Published != tt.wantPublished || st.Failed != tt.wantFailed {
				t.Errorf("published %d, failed %d; want %d, %d", st.Published, st.Failed, tt.wantPublished, tt.wantFailed)
			}
		})
	}
}

func TestRunGivesUpOnMissingAcks(t *testing.T) {
	old := drainTimeout
	drainTimeout = 50 * time.Millisecond
	t.Cleanup(func() { drainTimeout = old })

	st, err := run(context.Background(), &fakeJS{hang: true}, newTestGenerator(t, 5, 1), RunOptions{MaxMessages: 20})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if st.Published != 0 || st.Failed != 20 {
		t.Errorf("stats = %+v, want 0 published, 20 failed", st)
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	g := newTestGenerator(t, 2, 1)
	tests := []struct {
		name string
		g    *Generator
		opts RunOptions
	}{
		{"nil generator", nil, RunOptions{}},
		{"negative rate", g, RunOptions{Rate: -1}},
		{"negative duration", g, RunOptions{Duration: -time.Second}},
		{"negative max", g, RunOptions{MaxMessages: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := run(context.Background(), &fakeJS{}, tt.g, tt.opts); err == nil {
				t.Error("run accepted the options")
			}
		})
	}
}

func TestRunStops(t *testing.T) {
	tests := []struct {
		name         string
		opts         RunOptions
		cancelAfter  time.Duration
		minPub       int64
		maxPub       int64
		minEl, maxEl time.Duration
	}{
		{"duration", RunOptions{Rate: 1000, Duration: 200 * time.Millisecond, SkipInitial: true}, 0, 150, 230, 190 * time.Millisecond, 400 * time.Millisecond},
		{"context", RunOptions{Rate: 1000, SkipInitial: true}, 200 * time.Millisecond, 150, 230, 150 * time.Millisecond, 400 * time.Millisecond},
		{"5,000 per second", RunOptions{Rate: 5000, MaxMessages: 2500, SkipInitial: true}, 0, 2500, 2500, 450 * time.Millisecond, 700 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGenerator(t, 20, 1)
			ctx := context.Background()
			if tt.cancelAfter > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.cancelAfter)
				defer cancel()
			}
			st, err := run(ctx, &fakeJS{}, g, tt.opts)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if st.Published < tt.minPub || st.Published > tt.maxPub {
				t.Errorf("published %d, want %d..%d", st.Published, tt.minPub, tt.maxPub)
			}
			if st.Elapsed < tt.minEl || st.Elapsed > tt.maxEl {
				t.Errorf("elapsed %v, want %v..%v", st.Elapsed, tt.minEl, tt.maxEl)
			}
		})
	}
}

func TestRunLogsProgressWithSnakeCaseKeys(t *testing.T) {
	old := progressEvery
	progressEvery = 20 * time.Millisecond
	t.Cleanup(func() { progressEvery = old })

	var buf testenv.LogBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	opts := RunOptions{Rate: 500, Duration: 150 * time.Millisecond, Logger: log}
	if _, err := run(context.Background(), &fakeJS{}, newTestGenerator(t, 5, 1), opts); err != nil {
		t.Fatalf("run: %v", err)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	lines := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lines[rec["msg"].(string)]++
		for k := range rec {
			if !snake.MatchString(k) {
				t.Errorf("log key %q is not snake_case in %s", k, line)
			}
		}
	}
	for _, msg := range []string{"feed started", "feed progress", "feed finished"} {
		if lines[msg] == 0 {
			t.Errorf("no %q line in the log:\n%s", msg, buf.String())
		}
	}
}

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publish sends one matcher message and records it in the model.
func (w *world) publish(t testing.TB, kind, id string, body any) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	w.seq++
	msg := nats.NewMsg(w.names.SubjectPrefix + "." + kind + "." + id)
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s.%s.%d", kind, id, w.seq))
	if _, err := w.js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatalf("publish %s %s: %v", kind, id, err)
	}
	w.model.record(kind, id, data)
}

// appliedUpTo waits until the worker has acknowledged every message up to
// stream sequence seq, which it does after writing Postgres and Redis.
func (w *world) appliedUpTo(t testing.TB, seq uint64) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := w.js.Consumer(ctx, w.icfg.Stream, w.icfg.Consumer)
		if err == nil {
			ci, err := c.Info(ctx)
			if err == nil && ci.AckFloor.Stream >= seq {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingest did not apply stream sequence %d within 30s", seq)
		}
		time.Sleep(5 * time.Millisecond) // polling the consumer's ack floor
	}
}

// applied waits until the worker has acknowledged every stored message,
// which it does after writing Postgres and Redis.
func (w *world) applied(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		s, err := w.js.Stream(ctx, w.icfg.Stream)
		if err == nil {
			si, err := s.Info(ctx)
			if err == nil {
				c, err := w.js.Consumer(ctx, w.icfg.Stream, w.icfg.Consumer)
				if err == nil {
					ci, err := c.Info(ctx)
					if err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Stream >= si.State.LastSeq {
						return
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingest did not apply every message within 30s")
		}
		time.Sleep(10 * time.Millisecond) // polling the consumer's ack floor
	}
}

// noRejects checks that ingest refused none of the test's messages: a
// refused one would silently leave the model and the service apart.
func (w *world) noRejects(t testing.TB) {
	t.Helper()
	s, err := w.js.Stream(context.Background(), w.icfg.DLQStream)
	if err != nil {
		t.Fatalf("dlq stream: %v", err)
	}
	if n := s.CachedInfo().State.Msgs; n != 0 {
		t.Fatalf("ingest rejected %d of the test's messages", n)
	}
}

// settle waits until ingest has applied every published message and each
// node's search index shows the model's listing.
func (w *world) settle(t *testing.T, secret string, nodes ...*node) {
	t.Helper()
	w.applied(t)
	want := w.model.search("", 50)
	for _, n := range nodes {
		for deadline := time.Now().Add(15 * time.Second); ; {
			a := n.get(t, "/public/v1/markets/search?limit=50", secret)
			got := rtIDs(t, a, "universal_id")
			if a.status == http.StatusOK && reflect.DeepEqual(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("search index of %s: ids %q (status %d), want %q", n.base, got, a.status, want)
			}
			time.Sleep(20 * time.Millisecond) // polling the node's search answer
		}
	}
}

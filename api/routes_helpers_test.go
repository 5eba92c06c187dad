package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/api"
	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/ratelimit"
	"github.com/marketdata/marketdata/store"
)

// rtWorld is one test's deployment of the read routes: the env's services,
// an in-process ingest worker on the test's own stream, and API nodes that
// read the cache it writes. Data reaches Postgres and Redis only through
// NATS, as matcher messages (contract §4); model mirrors what was published,
// so tests derive what each route must answer from it.
type rtWorld struct {
	*env
	names testenv.Streams
	js    jetstream.JetStream
	cfg   ingest.Config
	rules cache.Rules
	cache *cache.Cache
	model *rtModel
	seq   int
}

// ingestConfig is ingest's production configuration on the test's own
// names, with batches of at most 200.
func ingestConfig(names testenv.Streams) ingest.Config {
	c := ingest.DefaultConfig()
	c.Stream, c.SubjectPrefix, c.DLQStream = names.Stream, names.SubjectPrefix, names.DLQStream
	c.DLQPrefix, c.NoticeSubject, c.Consumer = names.DLQPrefix, names.NoticeSubject, names.Consumer
	c.BatchSize = 200
	return c
}

func rtNewWorld(t *testing.T) *rtWorld {
	t.Helper()
	ctx := t.Context()
	w := &rtWorld{env: newEnv(t), model: rtNewModel()}
	var nc *nats.Conn
	nc, w.names = testenv.NATS(t)
	var err error
	if w.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	w.cfg = ingestConfig(w.names)
	if err := ingest.EnsureStreams(ctx, w.js, w.cfg, nil); err != nil {
		t.Fatal(err)
	}
	w.rules = cache.Rules{Retention: 168 * time.Hour, Now: time.Now}
	w.cache = cache.New(w.rdb, w.prefix, w.rules)
	// What `marketdata ingest` does at start: an empty store is a complete listing.
	if _, _, err := w.cache.EnsureComplete(ctx, w.st); err != nil {
		t.Fatalf("EnsureComplete: %v", err)
	}
	wk, err := ingest.New(w.cfg, ingest.Deps{
		NC: nc, Store: w.st, Cache: w.cache, Metrics: ingest.NewMetrics(prometheus.NewRegistry()),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now, Retention: 168 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wk.Run(wctx) }()
	t.Cleanup(func() { // before the NATS cleanup closes nc
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ingest worker: %v", err)
		}
	})
	return w
}

// start runs an API node wired as `marketdata api` wires it, loaded (Start)
// before it serves; its limit is high unless an option says otherwise.
func (w *rtWorld) start(t *testing.T, opts ...option) *node {
	t.Helper()
	cfg := nodeConfig{
		api: api.DefaultConfig(),
		limit: ratelimit.Config{
			Limit: 1_000_000, Window: time.Minute, AuthFailLimit: 100, AuthFailWindow: 5 * time.Minute, Prefix: w.prefix,
			Timeout: 50 * time.Millisecond,
		},
		listen: "127.0.0.1:0", rdb: w.rdb, creds: w.st,
		fallback: w.st, load: true, reader: readerConfig(),
	}
	cfg.api.DocsOrigin, cfg.api.KeyPepper, cfg.api.CursorSecret = docsOrigin, w.pepper, w.cursor
	cfg.api.KeyNoticeSubject, cfg.api.NoticeSubject = w.subject, w.names.NoticeSubject
	// Short, so that a flushed Redis is noticed (and repaired) by the next
	// snapshot well within the tests' patience.
	cfg.reader.TTL = 200 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	cfg.cache = cache.New(cfg.rdb, w.prefix, w.rules) // on the Redis an option may have chosen
	return w.env.start(t, cfg)
}

// publish sends one matcher message and records it in the model.
func (w *rtWorld) publish(t *testing.T, kind, id string, body any) {
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

// settle waits until ingest has applied every published message and each
// node's search index shows the model's listing.
func (w *rtWorld) settle(t *testing.T, secret string, nodes ...*node) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(15 * time.Second)
	for {
		cons, err := w.js.Consumer(ctx, w.cfg.Stream, w.cfg.Consumer)
		if err == nil {
			ci, err := cons.Info(ctx)
			s, serr := w.js.Stream(ctx, w.cfg.Stream)
			if err == nil && serr == nil && ci.NumPending == 0 && ci.NumAckPending == 0 &&
				s.CachedInfo().State.LastSeq <= ci.AckFloor.Stream {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("ingest did not drain the stream within 15s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := w.model.search("", 50)
	for _, n := range nodes {
		for {
			a := n.get(t, "/public/v1/markets/search?limit=50", secret)
			got := rtIDs(t, a, "universal_id")
			if a.status == http.StatusOK && reflect.DeepEqual(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("search index of %s: ids %q (status %d), want %q", n.base, got, a.status, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// rtData decodes a {"data":[...], ...} answer's items.
func rtData(t *testing.T, a answer) []map[string]any {
	t.Helper()
	var body struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("decode %.300s: %v", a.body, err)
	}
	return body.Data
}

// rtIDs lists field of every item of a data answer (nil unless 200).
func rtIDs(t *testing.T, a answer, field string) []string {
	t.Helper()
	if a.status != http.StatusOK {
		return nil
	}
	ids := []string{}
	for _, it := range rtData(t, a) {
		id, _ := it[field].(string)
		ids = append(ids, id)
	}
	return ids
}

// rtKeys lists an object's keys in the order the JSON holds them.
func rtKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%.200s: not an object", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// rtRawItems splits a data answer into its items' raw JSON.
func rtRawItems(t *testing.T, a answer) []json.RawMessage {
	t.Helper()
	var body struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("decode %.300s: %v", a.body, err)
	}
	return body.Data
}

// rtWantItems checks items against the expected ones: same values, and keys
// in the contract's order (keys lists every possible key; an item has those
// its expected value has).
func rtWantItems(t *testing.T, a answer, want []map[string]any, keys []string) {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %.300s", a.status, a.body)
	}
	raws := rtRawItems(t, a)
	if len(raws) != len(want) {
		t.Fatalf("%d items, want %d: %.500s", len(raws), len(want), a.body)
	}
	for i, raw := range raws {
		rtWantObject(t, fmt.Sprintf("item %d", i), raw, want[i], keys)
	}
}

// rtWantObject checks one JSON object's values and key order.
func rtWantObject(t *testing.T, what string, raw []byte, want map[string]any, keys []string) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%s: decode %.300s: %v", what, raw, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
	var wantKeys []string
	for _, k := range keys {
		if _, ok := want[k]; ok {
			wantKeys = append(wantKeys, k)
		}
	}
	if got := rtKeys(t, raw); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("%s: keys = %q, want %q", what, got, wantKeys)
	}
}

// rtWant200 checks a data answer's basics: 200, JSON, an ETag, the limits.
func rtWant200(t *testing.T, a answer) {
	t.Helper()
	wantBasics(t, a)
	if a.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %.300s", a.status, a.body)
	}
	if got := a.header.Get("Content-Type"); !strings.HasPrefix(got, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	if a.header.Get("ETag") == "" {
		t.Error("ETag missing on a 200")
	}
	wantLimitHeaders(t, a, true)
}

// rtSecret is a key with scope markets:read on a fresh account.
func rtSecret(t *testing.T, w *rtWorld) string {
	t.Helper()
	s, _ := w.newKey(t, keyOpts{scopes: []string{store.ScopeMarketsRead}})
	return s
}

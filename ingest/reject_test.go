package ingest_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/ingest"
)

// TestInvalidRejected sends every invalid class of contract §4, each followed
// by a valid message: the invalid one is recorded with its reason (table and
// DLQ subject) and the valid one still applies.
func TestInvalidRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(t)
	ctx := context.Background()

	trade := func(k string, v any) []byte {
		m := map[string]any{"market_id": "MK-1", "trade_id": "X", "venue": "venue_a", "price": 0.5, "size": 1, "side": "buy", "ts": "2026-11-01T10:00:00Z"}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return mustJSON(t, m)
	}
	event := func(k string, v any) []byte {
		m := eventMsg("EV-1", 1, "t", "A", "B")
		m[k] = v
		return mustJSON(t, m)
	}
	cases := []struct {
		name, kind, id string
		body           []byte
		reason         string
	}{
		{"bad JSON", "trade", "MK-1", []byte(`{"market_id":`), ingest.ReasonBadJSON},
		{"missing field", "trade", "MK-1", trade("size", nil), ingest.ReasonMissingField},
		{"version below 1", "event", "EV-1", event("version", 0), ingest.ReasonInvalidVersion},
		{"id outside the pattern", "trade", "MK-1", trade("trade_id", "a.b"), ingest.ReasonInvalidID},
		{"category outside its pattern", "event", "EV-1", event("category", "Politics"), ingest.ReasonInvalidCategory},
		{"unknown status", "event", "EV-1", event("status", "open"), ingest.ReasonInvalidStatus},
		{"unknown side", "trade", "MK-1", trade("side", "short"), ingest.ReasonInvalidSide},
		{"unknown venue", "trade", "MK-1", trade("venue", "venue_e"), ingest.ReasonInvalidVenue},
		{"price outside [0,1]", "trade", "MK-1", trade("price", 1.5), ingest.ReasonPriceRange},
		{"size not above 0", "trade", "MK-1", trade("size", 0), ingest.ReasonInvalidSize},
		{"time not RFC 3339", "trade", "MK-1", trade("ts", "2026-11-01 10:00:00"), ingest.ReasonInvalidTime},
		{"subject id differs", "trade", "MK-2", trade("market_id", "MK-1"), ingest.ReasonSubject},
		{"unknown kind", "order", "MK-1", trade("size", 1), ingest.ReasonSubject},
		{"match relation outside the list", "event", "EV-1", event("matches", map[string]any{
			"venue_a": map[string]any{"relation": "same", "confidence": 0.5, "method": "rules"}}), ingest.ReasonInvalidMatch},
		{"match confidence outside [0,1]", "event", "EV-1", event("matches", map[string]any{
			"venue_b": map[string]any{"relation": "identity", "confidence": 1.5, "method": "rules"}}), ingest.ReasonInvalidMatch},
		{"match for a venue without an id", "event", "EV-1", event("matches", map[string]any{
			"venue_c": map[string]any{"relation": "identity", "confidence": 1, "method": "rules"}}), ingest.ReasonInvalidMatch},
		{"match method over 32 characters", "event", "EV-1", event("matches", map[string]any{
			"venue_a": map[string]any{"relation": "identity", "confidence": 1, "method": strings.Repeat("m", 33)}}), ingest.ReasonTextTooLong},
		{"match of an unknown venue", "event", "EV-1", event("matches", map[string]any{
			"venue_e": map[string]any{"relation": "identity", "confidence": 1, "method": "rules"}}), ingest.ReasonInvalidVenue},
	}
	for i, c := range cases {
		e.publish(t, e.subject(c.kind, c.id), c.body, fmt.Sprintf("bad-%d", i))
		good := fmt.Sprintf(`{"market_id":"MK-1","trade_id":"G-%d","venue":"venue_a","price":0.5,"size":1,"side":"buy","ts":"2026-11-01T10:00:00Z"}`, i)
		e.publish(t, e.subject("trade", "MK-1"), []byte(good), fmt.Sprintf("good-%d", i))
	}
	e.waitDrained(t, 15*time.Second)

	rows, err := e.pool.Query(ctx, `SELECT subject, reason, payload FROM ingest_rejects ORDER BY stream_seq`)
	if err != nil {
		t.Fatal(err)
	}
	var got [][3]string
	for rows.Next() {
		var s, r string
		var p []byte
		if err := rows.Scan(&s, &r, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, [3]string{s, r, string(p)})
	}
	if len(got) != len(cases) {
		t.Fatalf("ingest_rejects: got %d rows, want %d: %q", len(got), len(cases), got)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if want := e.subject(c.kind, c.id); got[i][0] != want {
				t.Errorf("subject: got %s, want %s", got[i][0], want)
			}
			if !strings.HasPrefix(got[i][1], c.reason+":") {
				t.Errorf("reason: got %q, want it to start with %q", got[i][1], c.reason+":")
			}
			if got[i][2] != string(c.body) {
				t.Errorf("payload: got %q, want %q", got[i][2], c.body)
			}
		})
	}

	var applied int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM trades WHERE trade_id LIKE 'G-%'`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != len(cases) {
		t.Errorf("valid trades after rejects: got %d, want %d", applied, len(cases))
	}

	// The DLQ stream holds each reject under md.dlq.v1.<kind> with its reason.
	cons, err := e.js.OrderedConsumer(ctx, e.cfg.DLQStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(len(cases), jetstream.FetchMaxWait(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Appliers run concurrently, so the DLQ holds the rejects in any order:
	// put them back in stream order by the header that names it.
	type entry struct {
		seq  int
		line string
	}
	var entries []entry
	for m := range batch.Messages() {
		seq, _ := strconv.Atoi(m.Headers().Get("Md-Stream-Seq"))
		entries = append(entries, entry{seq, m.Subject() + " " + m.Headers().Get(ingest.RejectReasonHeader)})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].seq < entries[j].seq })
	var dlq []string
	for _, e := range entries {
		dlq = append(dlq, e.line)
	}
	if len(dlq) != len(cases) {
		t.Fatalf("DLQ: got %d messages, want %d: %q", len(dlq), len(cases), dlq)
	}
	for i, c := range cases {
		kind := c.kind
		if kind == "order" {
			kind = "unknown"
		}
		want := e.cfg.DLQPrefix + "." + kind + " " + c.reason + ":"
		if !strings.HasPrefix(dlq[i], want) {
			t.Errorf("DLQ message %d: got %q, want prefix %q", i, dlq[i], want)
		}
	}
}

// TestRejectNearMaxPayload: an invalid message of 1,000,000 bytes, and one
// of exactly the max payload, both reach the DLQ (cut short to leave room
// for the headers, marked with their original size, reason kept) and
// ingest_rejects (whole).
func TestRejectNearMaxPayload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(t)
	ctx := context.Background()
	maxPayload := int(e.nc.MaxPayload())
	sizes := []int{1_000_000, maxPayload} // the second has no header at all: data = max payload
	for i, size := range sizes {
		body := []byte(strings.Repeat("x", size)) // not JSON
		msgID := ""
		if i == 0 {
			msgID = "big-0"
		}
		e.publish(t, e.subject("trade", "MK-1"), body, msgID)
	}
	e.waitDrained(t, 30*time.Second)

	var stored []int
	if err := e.pool.QueryRow(ctx, `SELECT array_agg(length(payload) ORDER BY stream_seq) FROM ingest_rejects`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(stored) != fmt.Sprint(sizes) {
		t.Errorf("ingest_rejects payload sizes: got %v, want %v", stored, sizes)
	}

	cons, err := e.js.OrderedConsumer(ctx, e.cfg.DLQStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]jetstream.Msg{}
	for len(got) < len(sizes) {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("DLQ: got %d of %d messages: %v", len(got), len(sizes), err)
		}
		got[m.Headers().Get("Md-Stream-Seq")] = m
	}
	for i, size := range sizes {
		m := got[strconv.Itoa(i+1)]
		if m == nil {
			t.Fatalf("DLQ: no message for stream seq %d (got %v)", i+1, slices.Collect(maps.Keys(got)))
		}
		h := m.Headers()
		if r := h.Get(ingest.RejectReasonHeader); !strings.HasPrefix(r, ingest.ReasonBadJSON+":") {
			t.Errorf("%d bytes: reason %q, want %s", size, r, ingest.ReasonBadJSON)
		}
		if strings.Trim(string(m.Data()), "x") != "" {
			t.Errorf("%d bytes: DLQ data is not a prefix of the payload", size)
		}
		cut := h.Get(ingest.RejectTruncatedHeader)
		if size == 1_000_000 {
			// About 48 KB are left beside it: room for the headers, so whole.
			if cut != "" || len(m.Data()) != size {
				t.Errorf("%d bytes: DLQ has %d bytes, %s %q; want it whole, unmarked", size, len(m.Data()), ingest.RejectTruncatedHeader, cut)
			}
			continue
		}
		if cut != strconv.Itoa(size) || len(m.Data()) >= size || len(m.Data()) < size-1024 {
			t.Errorf("%d bytes: DLQ has %d bytes, %s %q; want it cut by the headers' size, marked %d", size, len(m.Data()), ingest.RejectTruncatedHeader, cut, size)
		}
	}
}

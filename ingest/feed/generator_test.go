package feed

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
)

// stepClock is a deterministic clock that advances by step on every call.
func stepClock(t *testing.T, start time.Time, step time.Duration) func() time.Time {
	t.Helper()
	now := start
	return func() time.Time {
		now = now.Add(step)
		return now
	}
}

var testEpoch = time.Date(2026, 11, 3, 14, 0, 0, 0, time.UTC)

// newTestGenerator builds a generator on a deterministic clock.
func newTestGenerator(t *testing.T, events int, seed uint64) *Generator {
	t.Helper()
	return NewGenerator(GenConfig{Events: events, Seed: seed, Now: stepClock(t, testEpoch, 1234567*time.Nanosecond)})
}

// generate returns Initial() followed by n messages of Next().
func generate(t *testing.T, g *Generator, n int) []Msg {
	t.Helper()
	msgs := g.Initial()
	for range n {
		msgs = append(msgs, g.Next())
	}
	return msgs
}

// decoded is a message together with what ingest.Decode made of it.
type decoded struct {
	Msg
	*ingest.Update
}

// decodeAll decodes every message with the ingest validator and fails the
// test on the first one it rejects.
func decodeAll(t *testing.T, prefix string, msgs []Msg) []decoded {
	t.Helper()
	out := make([]decoded, len(msgs))
	for i, m := range msgs {
		u, err := ingest.Decode(prefix, m.Subject, m.Data)
		if err != nil {
			t.Fatalf("message %d (%s) rejected: %v\n%s", i, m.Subject, err, m.Data)
		}
		out[i] = decoded{m, u}
	}
	return out
}

// version returns the version an update carries, or 0 for trades.
func version(u *ingest.Update) int64 {
	switch u.Kind {
	case ingest.KindEvent:
		return u.Event.Version
	case ingest.KindMarket:
		return u.Market.Version
	case ingest.KindPrice:
		return u.Price.Version
	}
	return 0
}

func TestEveryMessageDecodes(t *testing.T) {
	g := newTestGenerator(t, 200, 42)
	initial, nMarkets := g.Initial(), len(g.markets)
	msgs := decodeAll(t, ingest.DefaultSubjectPrefix, generate(t, g, 20_000))

	// Initial: every event, then every market, then one price per market.
	wantOrder := []struct {
		kind string
		n    int
	}{{ingest.KindEvent, 200}, {ingest.KindMarket, nMarkets}, {ingest.KindPrice, nMarkets}}
	i := 0
	for _, w := range wantOrder {
		for range w.n {
			if got := msgs[i].Kind; got != w.kind {
				t.Fatalf("initial message %d is a %s, want %s", i, got, w.kind)
			}
			i++
		}
	}
	if i != len(initial) {
		t.Fatalf("Initial() returned %d messages, want %d", len(initial), i)
	}

	kinds := map[string]int{}
	for _, m := range msgs[len(initial):] {
		kinds[m.Kind]++
	}
	for _, k := range []string{ingest.KindEvent, ingest.KindMarket, ingest.KindPrice, ingest.KindTrade} {
		if kinds[k] == 0 {
			t.Errorf("no %s message among 20,000 changes", k)
		}
	}
	if share := float64(kinds[ingest.KindPrice]) / 20_000; share < 0.7 || share > 0.9 {
		t.Errorf("prices are %.2f of changes, want about 0.8", share)
	}
	if share := float64(kinds[ingest.KindTrade]) / 20_000; share < 0.1 || share > 0.2 {
		t.Errorf("trades are %.2f of changes, want about 0.15", share)
	}
}

func TestVersionsIncreaseByOne(t *testing.T) {
	g := newTestGenerator(t, 200, 42)
	msgs := decodeAll(t, ingest.DefaultSubjectPrefix, generate(t, g, 20_000))
	last := map[string]int64{}
	trades := map[string]bool{}
	for i, m := range msgs {
		if m.Kind == ingest.KindTrade {
			if trades[m.Trade.TradeID] {
				t.Fatalf("message %d: trade id %s repeats", i, m.Trade.TradeID)
			}
			trades[m.Trade.TradeID] = true
			continue
		}
		key, v := m.Kind+"/"+m.Key(), version(m.Update)
		if prev, ok := last[key]; ok && v != prev+1 {
			t.Fatalf("message %d: %s version %d follows %d, want %d", i, key, v, prev, prev+1)
		}
		last[key] = v
	}
}

func TestMsgIDsAreUnique(t *testing.T) {
	g := newTestGenerator(t, 200, 7)
	msgs := decodeAll(t, ingest.DefaultSubjectPrefix, generate(t, g, 20_000))
	seen := map[string]int{}
	for i, m := range msgs {
		want := m.Kind + "." + m.Key()
		if !strings.HasPrefix(m.MsgID, want+".") && m.MsgID != want {
			t.Fatalf("message %d: MsgID %q does not name %s", i, m.MsgID, want)
		}
		if j, ok := seen[m.MsgID]; ok {
			t.Fatalf("messages %d and %d share MsgID %q", j, i, m.MsgID)
		}
		seen[m.MsgID] = i
	}
}

func TestInitialIsRepeatable(t *testing.T) {
	g := newTestGenerator(t, 20, 1)
	a, b := g.Initial(), g.Initial()
	if len(a) != len(b) {
		t.Fatalf("Initial() lengths differ: %d then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].MsgID != b[i].MsgID || !bytes.Equal(a[i].Data, b[i].Data) {
			t.Fatalf("Initial() message %d differs between calls", i)
		}
	}
}

// TestInitialReplaysLatestMessages checks that Initial, called after changes
// (between two changes: see Initial), repeats for every entity exactly the
// last message already sent for it, so that a replay never carries a known
// MsgID with other content.
func TestInitialReplaysLatestMessages(t *testing.T) {
	g := newTestGenerator(t, 50, 8)
	sent := map[string][]byte{}
	msgs := generate(t, g, 5_000)
	for len(g.pending) > 0 { // finish the change in progress
		msgs = append(msgs, g.Next())
	}
	for _, m := range msgs {
		sent[m.MsgID] = m.Data
	}
	for _, m := range g.Initial() {
		data, ok := sent[m.MsgID]
		if !ok {
			t.Fatalf("Initial() has %s, which was never sent", m.MsgID)
		}
		if !bytes.Equal(data, m.Data) {
			t.Fatalf("Initial() has %s with other content than was sent:\n%s\n%s", m.MsgID, m.Data, data)
		}
	}
}

func TestSameSeedSameBytes(t *testing.T) {
	tests := []struct {
		name       string
		seedA      uint64
		seedB      uint64
		wantEqual  bool
		numChanges int
	}{
		{"same seed", 99, 99, true, 5_000},
		{"other seed", 99, 100, false, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := generate(t, newTestGenerator(t, 50, tt.seedA), tt.numChanges)
			b := generate(t, newTestGenerator(t, 50, tt.seedB), tt.numChanges)
			equal := len(a) == len(b)
			for i := 0; equal && i < len(a); i++ {
				equal = a[i].Subject == b[i].Subject && a[i].MsgID == b[i].MsgID && bytes.Equal(a[i].Data, b[i].Data)
			}
			if equal != tt.wantEqual {
				t.Errorf("streams equal = %v, want %v", equal, tt.wantEqual)
			}
		})
	}
}

func BenchmarkNext(b *testing.B) {
	g := NewGenerator(GenConfig{Events: 1000, Seed: 1})
	b.ReportAllocs()
	for b.Loop() {
		g.Next()
	}
}

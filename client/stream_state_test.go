package client

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

func fp(v float64) *float64 { return &v }

func testPrice(id string, v int64, bid float64) *Price {
	return &Price{MarketID: id, EventID: "ev-1", Status: "active", Version: v,
		Quotes:    map[string]Quote{"venue_a": {Bid: fp(bid), Volume24h: 1}},
		BestBid:   fp(bid),
		UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(v) * time.Second)}
}

// drain pops every event waiting.
func drain(q *streamQueue) []StreamEvent {
	var out []StreamEvent
	for {
		ev, ok := q.pop()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// versions lists the (market, version) of price events.
func versions(evs []StreamEvent) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == StreamPrice {
			out = append(out, ev.Price.MarketID+"@"+strconv.FormatInt(ev.Price.Version, 10))
		} else {
			out = append(out, ev.Kind.String())
		}
	}
	return out
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStreamQueueConflatesInPlace(t *testing.T) {
	q := newStreamQueue()
	q.push(StreamEvent{Kind: StreamSubscribed, MarketIDs: []string{"a", "b"}})
	if !q.offer(testPrice("a", 1, 0.1)) || !q.offer(testPrice("b", 1, 0.1)) {
		t.Fatal("first prices not queued")
	}
	// A newer a replaces the one waiting where it stands: a still comes
	// before b, and only its newest version comes.
	if !q.offer(testPrice("a", 3, 0.3)) {
		t.Fatal("a@3 not queued")
	}
	if q.offer(testPrice("a", 2, 0.2)) {
		t.Fatal("a@2 queued after a@3 waited")
	}
	got := versions(drain(q))
	want := []string{"subscribed", "a@3", "b@1"}
	if !eq(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if q.conflated != 1 {
		t.Fatalf("conflated %d, want 1", q.conflated)
	}
	if q.len() != 0 || len(q.pending) != 0 {
		t.Fatalf("queue not empty after drain: %d entries, %d pending", q.len(), len(q.pending))
	}
}

func TestStreamQueueNeverOlderNorRepeat(t *testing.T) {
	q := newStreamQueue()
	q.offer(testPrice("a", 5, 0.5))
	drain(q)
	// After a reconnect the snapshot repeats what the consumer has, and a
	// node behind may send an older version: neither is handed out.
	if q.offer(testPrice("a", 5, 0.5)) {
		t.Fatal("a repeat of a@5 queued")
	}
	if q.offer(testPrice("a", 4, 0.4)) {
		t.Fatal("a@4 queued after a@5 was handed out")
	}
	// The same version with other fields is a change (the market resolved
	// without its quotes moving).
	resolved := testPrice("a", 5, 0.5)
	resolved.Status = "resolved"
	if !q.offer(resolved) {
		t.Fatal("a@5 resolved not queued")
	}
	if !q.offer(testPrice("a", 6, 0.6)) {
		t.Fatal("a@6 not queued")
	}
	got := drain(q)
	if len(got) != 1 || got[0].Price.Version != 6 {
		t.Fatalf("events %v, want a@6 alone (it replaced the resolved a@5 waiting)", versions(got))
	}
}

func TestStreamQueueForget(t *testing.T) {
	q := newStreamQueue()
	q.offer(testPrice("a", 1, 0.1))
	q.offer(testPrice("b", 1, 0.1))
	q.forget("a")
	got := versions(drain(q))
	if !eq(got, []string{"b@1"}) {
		t.Fatalf("events %v, want b@1 alone", got)
	}
	q.forget("b")
	// A market subscribed again gets its current price again, even the
	// version it had.
	if !q.offer(testPrice("b", 1, 0.1)) {
		t.Fatal("b@1 after forget not queued")
	}
}

func TestStreamQueueCoalescesDisconnects(t *testing.T) {
	q := newStreamQueue()
	q.push(StreamEvent{Kind: StreamConnected})
	for i := 1; i <= 100; i++ {
		q.push(StreamEvent{Kind: StreamDisconnected, Attempts: i})
	}
	q.push(StreamEvent{Kind: StreamConnected, Reconnect: true})
	q.push(StreamEvent{Kind: StreamDisconnected, Attempts: 1})
	got := drain(q)
	if len(got) != 4 || got[1].Kind != StreamDisconnected || got[1].Attempts != 100 ||
		got[3].Kind != StreamDisconnected || got[3].Attempts != 1 {
		t.Fatalf("events %+v: want connected, disconnected (100 attempts), connected, disconnected (1)", got)
	}
}

func TestStreamQueueCompacts(t *testing.T) {
	q := newStreamQueue()
	// A consumer that keeps up leaves no slice growing without bound.
	for i := range 10000 {
		q.push(StreamEvent{Kind: StreamConnected})
		q.push(StreamEvent{Kind: StreamConnected})
		if _, ok := q.pop(); !ok {
			t.Fatal("nothing to pop")
		}
		if i%3 == 0 {
			q.pop()
		}
	}
	if n := q.len(); cap(q.entries) > 4*n+256 {
		t.Fatalf("%d waiting in a slice of capacity %d", n, cap(q.entries))
	}
}

func TestSamePrice(t *testing.T) {
	a := testPrice("a", 1, 0.1)
	b := testPrice("a", 1, 0.1)
	if !samePrice(a, b) {
		t.Fatal("equal prices differ")
	}
	for name, change := range map[string]func(p *Price){
		"bid":      func(p *Price) { p.Quotes["venue_a"] = Quote{Bid: fp(0.2), Volume24h: 1} },
		"no bid":   func(p *Price) { p.Quotes["venue_a"] = Quote{Volume24h: 1} },
		"venue":    func(p *Price) { p.Quotes["venue_b"] = Quote{} },
		"best ask": func(p *Price) { p.BestAsk = fp(0.9) },
		"status":   func(p *Price) { p.Status = "resolved" },
		"event":    func(p *Price) { p.EventID = "ev-2" },
		"time":     func(p *Price) { p.UpdatedAt = p.UpdatedAt.Add(time.Millisecond) },
	} {
		c := testPrice("a", 1, 0.1)
		change(c)
		if samePrice(a, c) || samePrice(c, a) {
			t.Errorf("%s: a changed price is the same", name)
		}
	}
}

func TestSeqCheck(t *testing.T) {
	var s seqCheck
	for i := int64(1); i <= 3; i++ {
		if err := s.check(i); err != nil {
			t.Fatalf("seq %d: %v", i, err)
		}
	}
	for _, bad := range []int64{5, 3, 0} {
		err := s.check(bad)
		var gap *SeqGapError
		if !errors.As(err, &gap) || gap.Want != 4 || gap.Got != bad {
			t.Fatalf("seq %d after 3: %v, want a *SeqGapError 4/%d", bad, err, bad)
		}
	}
	if err := s.check(4); err != nil {
		t.Fatalf("seq 4 after the refused ones: %v", err)
	}
}

func TestStreamBackoff(t *testing.T) {
	lo, hi := 200*time.Millisecond, 5*time.Second
	for _, c := range []struct {
		n        int
		min, max time.Duration
	}{
		{0, 100 * time.Millisecond, 200 * time.Millisecond},
		{1, 200 * time.Millisecond, 400 * time.Millisecond},
		{3, 800 * time.Millisecond, 1600 * time.Millisecond},
		{5, 2500 * time.Millisecond, 5 * time.Second}, // 6.4 s capped at 5 s
		{1000, 2500 * time.Millisecond, 5 * time.Second},
	} {
		if got := streamBackoff(c.n, lo, hi, 0); got != c.min {
			t.Errorf("attempt %d, r=0: %v, want %v", c.n, got, c.min)
		}
		if got := streamBackoff(c.n, lo, hi, 0.999999999); got < c.max-time.Millisecond || got > c.max {
			t.Errorf("attempt %d, r≈1: %v, want ≈%v", c.n, got, c.max)
		}
	}
}

func refused(code string, ids ...string) StreamEvent {
	return StreamEvent{Kind: StreamRefused, Err: &StreamCommandError{Op: "subscribe", MarketIDs: ids, Code: code, Message: "x"}}
}

// TestStreamQueueFoldsCycles: reconnect cycles that wait fold into the
// one before them; what cannot be folded without losing what it says
// (a cycle with an ack after one without) is queued as is.
func TestStreamQueueFoldsCycles(t *testing.T) {
	q := newStreamQueue()
	q.push(StreamEvent{Kind: StreamConnected})
	q.push(StreamEvent{Kind: StreamSubscribed, MarketIDs: []string{"a", "b", "c"}, Missing: []string{}})
	q.push(StreamEvent{Kind: StreamDisconnected, Attempts: 1})
	// A cycle without an ack (the server closed first), then ones with.
	q.push(StreamEvent{Kind: StreamConnected, Reconnect: true})
	q.push(StreamEvent{Kind: StreamDisconnected, Attempts: 2})
	for i := range 50 {
		q.push(StreamEvent{Kind: StreamConnected, Reconnect: true})
		ack := StreamEvent{Kind: StreamSubscribed, Resubscribe: true, MarketIDs: []string{"a", "b"}, Missing: []string{}}
		if i == 10 {
			ack.MarketIDs, ack.Missing = []string{"a"}, []string{"b"}
		} else if i > 10 {
			ack.MarketIDs = []string{"a"}
		}
		q.push(ack)
		q.push(refused("unavailable", "a"))
		q.push(refused("unavailable", "a")) // the same again: replaces it
		q.push(StreamEvent{Kind: StreamDisconnected, Attempts: 3 + i})
	}
	got := drain(q)
	want := []string{"connected", "subscribed", "disconnected", "connected", "disconnected",
		"connected", "subscribed", "refused", "disconnected"}
	if !eq(versions(got), want) {
		t.Fatalf("events %v, want %v", versions(got), want)
	}
	// The cycle without an ack stays as it is; the 49 cycles after the
	// first with an ack fold into it: its ack is the latest and lists b as
	// missing.
	if c := got[5]; c.Merged != 49 {
		t.Fatalf("connected %+v: want 49 merged", c)
	}
	if a := got[6]; a.Merged != 49 || !eq(a.MarketIDs, []string{"a"}) || !eq(a.Missing, []string{"b"}) {
		t.Fatalf("ack %+v: want [a] accepted, [b] missing, 49 merged", a)
	}
	if r := got[7]; r.Merged != 99 {
		t.Fatalf("refused %+v: want 99 merged (2 per cycle, 1 more)", r)
	}
	if d := got[8]; d.Attempts != 52 || d.Merged != 49 {
		t.Fatalf("last disconnected %+v: want attempts 52, 49 merged", d)
	}
	if q.goneN != 0 || q.news != 0 || len(q.entries) != 0 {
		t.Fatalf("after draining: goneN %d, news %d, %d entries", q.goneN, q.news, len(q.entries))
	}
}

// TestStreamQueueCapsNews: news that cannot fold is capped at
// maxStreamNews, the oldest dropped and counted; prices are not touched.
func TestStreamQueueCapsNews(t *testing.T) {
	q := newStreamQueue()
	q.offer(testPrice("a", 1, 0.5))
	for i := range maxStreamNews + 500 {
		q.push(StreamEvent{Kind: StreamUnsubscribed, MarketIDs: []string{strconv.Itoa(i)}})
	}
	if q.news != maxStreamNews || q.dropped != 500 {
		t.Fatalf("news %d, dropped %d: want %d and 500", q.news, q.dropped, maxStreamNews)
	}
	if n := len(q.entries) - q.head; n > 2*maxStreamNews+65 {
		t.Fatalf("%d entries kept for %d waiting", n, maxStreamNews+1)
	}
	got := drain(q)
	if len(got) != maxStreamNews+1 || got[0].Kind != StreamPrice || got[1].MarketIDs[0] != "500" || got[len(got)-1].MarketIDs[0] != strconv.Itoa(maxStreamNews+499) {
		t.Fatalf("%d events, first %+v, second %+v", len(got), got[0], got[1])
	}
}

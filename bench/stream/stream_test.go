package stream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/marketdata/marketdata/bench/world"
)

// priceMsg is a price message as the node frames a cache price item
// (cache/render.go's layout) behind type and seq.
func priceMsg(seq int64, market string, version int64) string {
	return fmt.Sprintf(`{"type":"price","seq":%d,"market_id":%q,"event_id":"ev_000001","status":"active",`+
		`"quotes":{"venue_a":{"bid":0.41,"ask":0.43,"last":0.42,"volume_24h":1234},"venue_c":{"bid":0.4,"ask":0.44,"last":null,"volume_24h":7}},`+
		`"best_bid":0.41,"best_ask":0.43,"version":%d,"updated_at":"2026-01-02T03:04:05.123456Z"}`, seq, market, version)
}

// TestScanStream: the cheap scan reads what a full decode reads from each
// kind of server message, and what it cannot read is an error.
func TestScanStream(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want streamMsg
	}{
		{"price", priceMsg(17, "mk_000001_02", 42), streamMsg{Kind: kindPrice, Seq: 17, Market: []byte("mk_000001_02"), Version: 42}},
		{"price with fields reordered", `{"seq":3,"version":9,"type":"price","market_id":"mk_1","quotes":{}}`,
			streamMsg{Kind: kindPrice, Seq: 3, Market: []byte("mk_1"), Version: 9}},
		{"subscribed", `{"type":"subscribed","seq":1,"market_ids":["mk_000001_01","mk_000002_01"],"missing":[]}`,
			streamMsg{Kind: kindSubscribed, Seq: 1}},
		{"unsubscribed", `{"type":"unsubscribed","seq":30,"market_ids":["mk_000001_01"]}`, streamMsg{Kind: kindUnsubscribed, Seq: 30}},
		{"error", `{"type":"error","seq":2,"code":"invalid_request","message":"market_ids: 501 markets, at most 500"}`,
			streamMsg{Kind: kindError, Seq: 2}},
		{"unknown type", `{"type":"heartbeat","seq":5}`, streamMsg{Kind: kindOther, Seq: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := scanStream([]byte(tt.msg))
			if err != nil {
				t.Fatalf("scanStream: %v", err)
			}
			if got.Kind != tt.want.Kind || got.Seq != tt.want.Seq || string(got.Market) != string(tt.want.Market) || got.Version != tt.want.Version {
				t.Errorf("got %+v (market %s), want %+v (market %s)", got, got.Market, tt.want, tt.want.Market)
			}
			if err := checkStream([]byte(tt.msg), got); err != nil {
				t.Errorf("checkStream: %v", err)
			}
		})
	}
	for _, bad := range []string{
		`{"seq":1,"market_id":"mk_1","version":2}`,                       // no type
		`{"type":"price","market_id":"mk_1","version":2}`,                // no seq
		`{"type":"price","seq":0,"market_id":"mk_1","version":2}`,        // seq starts at 1
		`{"type":"price","seq":4,"version":2}`,                           // no market
		`{"type":"price","seq":4,"market_id":"mk_1","version":"2"}`,      // version not a number
		`{"type": "price", "seq": 4, "market_id": "mk_1", "version": 2}`, // not compact
		`{"type":"price","seq":4,"market_id":"mk_1","updated_at":"2026-`, // cut short
	} {
		if m, err := scanStream([]byte(bad)); !errors.Is(err, errStreamLayout) {
			t.Errorf("scanStream(%s): got %+v, %v; want errStreamLayout", bad, m, err)
		}
	}
}

// TestCheckStreamCatchesMisreads: a scan that disagrees with the full
// decode (here: a nested "version" ahead of the price's own) is caught.
func TestCheckStreamCatchesMisreads(t *testing.T) {
	msg := []byte(`{"type":"price","seq":4,"meta":{"version":1},"market_id":"mk_1","version":7}`)
	got, err := scanStream(msg)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 {
		t.Fatalf("the scan is expected to take the first version key here; got %d", got.Version)
	}
	if err := checkStream(msg, got); !errors.Is(err, errStreamLayout) {
		t.Errorf("checkStream: got %v, want errStreamLayout", err)
	}
}

// testSchedule plans updates over markets in the order given, each
// published at the ns offset given (0: not published).
func testSchedule(markets int, plan []int32, pubNS []int64) *world.UpdateSchedule {
	i := 0
	s := world.NewSchedule(time.Now(), markets, len(plan), func() int32 { m := plan[i]; i++; return m })
	for n, ns := range pubNS {
		if ns > 0 {
			s.PubAt[n].Store(ns + 1)
		}
	}
	return s
}

// TestNoticeClock: a notice stamps every unstamped version of its markets
// published by its arrival, and none published after it; forget undoes a
// stamp with its publish time.
func TestNoticeClock(t *testing.T) {
	// Updates: 0 = m0 v2 at 10, 1 = m1 v2 at 20, 2 = m0 v3 at 30, 3 = m0 v4 at 50.
	s := testSchedule(2, []int32{0, 1, 0, 0}, []int64{10, 20, 30, 50})
	k := newNoticeClock(s, map[string]int32{"m0": 0, "m1": 1})
	k.observe([]string{"m0"}, 35)
	k.observe([]string{"m0", "m1", "nope"}, 40)
	k.observe([]string{"m0"}, 60)
	want := map[int]int64{0: 35, 1: 40, 2: 35, 3: 60}
	for n, at := range want {
		if got, ok := k.arrival(n); !ok || got != at {
			t.Errorf("update %d: arrival %d (%v), want %d", n, got, ok, at)
		}
	}
	if k.unknown.Load() != 1 {
		t.Errorf("unknown markets: got %d, want 1", k.unknown.Load())
	}
	k.forget(3)
	if _, ok := k.arrival(3); ok {
		t.Error("update 3 still stamped after forget")
	}
	if _, ok := s.PubTime(0, 4); ok {
		t.Error("update 3 still published after forget")
	}
	s.PubAt[3].Store(70 + 1)
	k.observe([]string{"m0"}, 80)
	if got, _ := k.arrival(3); got != 80 {
		t.Errorf("update 3 republished: arrival %d, want 80", got)
	}
	if got := s.Latest(0); got != 4 {
		t.Errorf("latest(m0): got %d, want 4", got)
	}
	if got := s.Latest(1); got != 2 {
		t.Errorf("latest(m1): got %d, want 2", got)
	}
}

// TestStreamPhaseFanout: a delivery measures from its update's stamp; one
// that came before the load tool's notice waits for settle, which counts it
// at 0 ms, and one no notice ever followed is left out.
func TestStreamPhaseFanout(t *testing.T) {
	s := testSchedule(1, []int32{0, 0, 0}, []int64{1_000_000, 2_000_000, 3_000_000})
	k := newNoticeClock(s, map[string]int32{"m0": 0})
	k.observe([]string{"m0"}, 1_500_000)
	var p streamPhase
	p.deliver(k, 0, 1_000_000, 4_500_000) // e2e 3.5 ms, fan-out 3 ms
	p.deliver(k, 1, 2_000_000, 2_200_000) // before its notice
	p.deliver(k, 2, 3_000_000, 3_100_000) // no notice at all
	k.observe([]string{"m0"}, 2_400_000)  // stamps update 1 only: update 2 is published later
	e2e, fan := p.settle(k)
	if e2e.Count != 3 || e2e.MaxMS != 3.5 {
		t.Errorf("e2e: got %+v, want 3 deliveries, max 3.5 ms", e2e)
	}
	if fan.Count != 2 || fan.BeforeNotice != 1 || fan.NoNotice != 1 || fan.MaxMS != 3 {
		t.Errorf("fan-out: got %+v, want 2 counted (max 3 ms), 1 before its notice, 1 with none", fan)
	}
}

// fakeStream is a stream server that answers the n-th command with the
// messages of script[n] (seq and all), and holds the connection open.
func fakeStream(t *testing.T, script ...[]string) *httptest.Server {
	t.Helper()
	up := websocket.Upgrader{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != streamPath || r.Header.Get("Authorization") != "Bearer secret" {
			http.Error(w, `{"error":{"code":"unauthorized"}}`, http.StatusUnauthorized)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close() //nolint:errcheck // the test is over with the connection
		for n := 0; ; n++ {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
			if n >= len(script) {
				continue
			}
			for _, m := range script[n] {
				if err := ws.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
					return
				}
			}
		}
	}))
}

// TestStreamClientAccounting: a client counts what the contract forbids
// (seq gaps, versions going backwards, prices of markets never
// acknowledged, versions never published, error messages), tells
// snapshots from live deliveries, measures only live ones, and reports the
// markets it does not hold at their newest version.
func TestStreamClientAccounting(t *testing.T) {
	ids := []string{"mk_a", "mk_b", "mk_c"}
	index := map[string]int32{"mk_a": 0, "mk_b": 1, "mk_c": 2}
	// Updates: 0 = a v2, 1 = b v2, 2 = a v3, 3 = a v4, 4 = b v3; all but
	// the last published.
	s := testSchedule(3, []int32{0, 1, 0, 0, 1}, []int64{1e6, 2e6, 3e6, 4e6, 0})
	k := newNoticeClock(s, index)
	k.observe([]string{"mk_a", "mk_b"}, 5e6)
	srv := fakeStream(t, []string{
		`{"type":"subscribed","seq":1,"market_ids":["mk_a","mk_b"],"missing":[]}`,
		priceMsg(2, "mk_a", 1), // snapshots
		priceMsg(3, "mk_b", 2),
		priceMsg(4, "mk_a", 2), // live
		priceMsg(5, "mk_b", 2), // repeat: allowed
		priceMsg(7, "mk_a", 4), // seq gap; a v3 conflated
		priceMsg(8, "mk_a", 3), // backwards
		priceMsg(9, "mk_c", 2), // never acknowledged
		priceMsg(10, "mk_b", 3),
		`{"type":"error","seq":11,"code":"invalid_request","message":"no"}`,
		`{"type":"subscribed","seq":12,"market_ids":[],"missing":[]}`, // the end
	})
	defer srv.Close()
	l := &streamLoad{sched: s, clock: k, index: index}
	ph := &streamPhase{}
	l.phase.Store(ph)
	addr := strings.TrimPrefix(srv.URL, "http://")
	if _, err := dialStream(context.Background(), l, addr, "wrong", 0); err == nil || !strings.Contains(err.Error(), "status 401") {
		t.Errorf("dial with a wrong key: got %v, want the 401 named", err)
	}
	c, err := dialStream(context.Background(), l, addr, "secret", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.subscribe([]int32{0, 1, 2}, ids); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.acks.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c.close()
	want := clientFaults{SeqGaps: 1, Backwards: 1, Unsubscribed: 1, Unknown: 1, Errors: 1}
	if c.faults != want {
		t.Errorf("faults: got %+v, want %+v (first: %s)", c.faults, want, c.first)
	}
	if c.repeats != 1 || l.snapshots.Load() != 2 || l.acks.Load() != 2 || l.live.Load() != 3 {
		t.Errorf("repeats %d, snapshots %d, acks %d, live %d; want 1, 2, 2, 3", c.repeats, l.snapshots.Load(), l.acks.Load(), l.live.Load())
	}
	e2e, _ := ph.settle(k)
	if d := ph.deliveries.Load(); d != 2 || e2e.Count != 2 || ph.conflated.Load() != 1 {
		t.Errorf("measured deliveries %d (e2e count %d), conflated %d; want 2, 2, 1", d, e2e.Count, ph.conflated.Load())
	}
	// a holds v4 (its newest); b holds v3, never published, so it is not
	// behind; c was asked for and never acknowledged.
	if n, first := c.behind(s, ids); n != 1 || !strings.Contains(first, "mk_c held at version 0") {
		t.Errorf("behind: got %d (%s), want 1: mk_c", n, first)
	}
}

// TestStreamClientRetriesUnavailable: a subscribe the node refuses as
// unavailable is counted, handed back for sending again, and is no fault;
// sent again, it is acknowledged.
func TestStreamClientRetriesUnavailable(t *testing.T) {
	ids := []string{"mk_a"}
	index := map[string]int32{"mk_a": 0}
	s := testSchedule(1, []int32{0}, []int64{0})
	srv := fakeStream(t,
		[]string{`{"type":"error","seq":1,"code":"unavailable","message":"prices cannot be read right now; nothing was subscribed: subscribe again"}`},
		[]string{`{"type":"subscribed","seq":2,"market_ids":["mk_a"],"missing":[]}`, priceMsg(3, "mk_a", 1)},
	)
	defer srv.Close()
	l := &streamLoad{sched: s, clock: newNoticeClock(s, index), index: index, retry: make(chan *streamClient, 1)}
	c, err := dialStream(context.Background(), l, strings.TrimPrefix(srv.URL, "http://"), "secret", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := c.subscribe([]int32{0}, ids); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-l.retry:
		if got != c {
			t.Fatalf("retry handed back connection %d, want %d", got.n, c.n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the refused subscribe was not handed back")
	}
	if err := c.resubscribe(ids); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.snapshots.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c.close()
	if l.refused.Load() != 1 || l.acks.Load() != 1 || l.snapshots.Load() != 1 || c.faults != (clientFaults{}) {
		t.Errorf("refused %d, acks %d, snapshots %d, faults %+v; want 1, 1, 1, none", l.refused.Load(), l.acks.Load(), l.snapshots.Load(), c.faults)
	}
}

// TestSubscriptionLists: each connection gets distinct markets of the
// world, and the lists differ between connections.
func TestSubscriptionLists(t *testing.T) {
	lists := subscriptionLists(50, 40, 100, 1)
	same := 0
	for c, l := range lists {
		seen := map[int32]bool{}
		for _, m := range l {
			if m < 0 || m >= 100 || seen[m] {
				t.Fatalf("connection %d: market %d repeated or out of range in %v", c, m, l)
			}
			seen[m] = true
		}
		if c > 0 && fmt.Sprint(l) == fmt.Sprint(lists[c-1]) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d connections have their predecessor's list", same)
	}
}

// TestParseSteps: the ramp's steps must rise.
func TestParseSteps(t *testing.T) {
	if got, err := parseSteps("40, 60,100"); err != nil || fmt.Sprint(got) != "[40 60 100]" {
		t.Errorf("got %v, %v", got, err)
	}
	if got, err := parseSteps("none"); err != nil || got != nil {
		t.Errorf("none: got %v, %v", got, err)
	}
	for _, bad := range []string{"40,40", "60,40", "0", "x", ""} {
		if _, err := parseSteps(bad); err == nil {
			t.Errorf("parseSteps(%q): no error", bad)
		}
	}
}

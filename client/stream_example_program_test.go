package client_test

import (
	"bufio"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/servicetest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// TestStreamExampleProgram runs examples/stream-prices against the real
// service: the snapshot of the first 2 events' 4 markets, a live change,
// the API node stopped (1001) and started again — the program reconnects,
// the snapshot after it repeats nothing — and a change after it (run with
// -v to read the output).
func TestStreamExampleProgram(t *testing.T) {
	testenv.Integration(t, "the service and the go command")
	bin := buildExample(t, t.TempDir(), "stream-prices")
	s := startService(t, nil)
	w := s.Seed("sp", 2, 2)
	key := s.NewKey("markets:read", "stream:read")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, stdout := startExample(ctx, t, bin, append(os.Environ(), "MD_KEY="+key.Secret), "-base-url", s.URL(), "-events", "2")
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var out []string
	// until reads lines until one contains all of want.
	until := func(want ...string) {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the program ended before a line with %q:\n%s", want, strings.Join(out, "\n"))
				}
				out = append(out, line)
				all := true
				for _, s := range want {
					all = all && strings.Contains(line, s)
				}
				if all {
					return
				}
			case <-timeout:
				t.Fatalf("no line with %q within a minute:\n%s", want, strings.Join(out, "\n"))
			}
		}
	}
	until("connected")
	until("subscribed to 4 markets")
	// The snapshot: the next 4 lines, one v1 price per market.
	var snap []string
	for range w.Markets {
		select {
		case line := <-lines:
			out = append(out, line)
			if f := strings.Fields(line); len(f) > 2 && f[2] == "v1" {
				snap = append(snap, f[1])
			}
		case <-time.After(time.Minute):
			t.Fatalf("no snapshot within a minute:\n%s", strings.Join(out, "\n"))
		}
	}
	slices.Sort(snap)
	if want := []string{w.Markets[0].ID, w.Markets[1].ID, w.Markets[2].ID, w.Markets[3].ID}; !slices.Equal(snap, want) {
		t.Fatalf("snapshot of %v, want v1 of %v:\n%s", snap, want, strings.Join(out, "\n"))
	}
	live := &servicetest.Price{MarketID: w.Markets[2].ID, Quotes: map[string]servicetest.Quote{
		"venue_a": {Bid: 0.61, Ask: 0.64}, "venue_c": {Bid: 0.6, Ask: 0.63}}}
	s.PublishPrice(live)
	until(live.MarketID, " v2 ", "bid 0.61 ask 0.63")
	s.APIs[0].Stop()
	until("disconnected", "1001")
	s.APIs[0].Start()
	until("reconnected")
	until("subscribed to 4 markets")
	after := &servicetest.Price{MarketID: w.Markets[0].ID, Quotes: map[string]servicetest.Quote{"venue_b": {Bid: 0.2, Ask: 0.25}}}
	s.PublishPrice(after)
	until(after.MarketID, " v2 ", "bid 0.20 ask 0.25")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for line := range lines {
		out = append(out, line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stream-prices: %v\n%s", err, strings.Join(out, "\n"))
	}
	text := strings.Join(out, "\n")
	t.Logf("$ stream-prices -events 2   (the API node stopped and started again meanwhile; ^C at the end)\n%s", text)
	// 4 snapshot prices, 1 live, none repeated after the reconnect, 1 after.
	if n := strings.Count(text, " bid "); n != 6 || !strings.HasSuffix(text, "6 prices handed over, 0 conflated while this program was busy") {
		t.Fatalf("stream-prices: %d price lines, want 6, and the summary:\n%s", n, text)
	}
}

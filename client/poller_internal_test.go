package client

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// snapshotBody is a /prices/snapshot answer of one price of market m.
func snapshotBody(m, status string, version int64, bid float64) string {
	return fmt.Sprintf(`{"data":[{"market_id":%q,"event_id":"ev-1","status":%q,"quotes":{"venue_a":{"bid":%g,"ask":0.6,"last":0.55,"volume_24h":10}},"best_bid":%g,"best_ask":0.6,"version":%d,"updated_at":"2026-11-24T09:00:00Z"}],"missing":[]}`,
		m, status, bid, bid, version)
}

// TestPollerSameVersionChange: the poller hands over a price whose version
// is above the last one it handed over for its market, and also one of the
// same version whose other fields changed (a market that resolved: its
// status changes without its price's version moving), as the stream does;
// never a repeat nor an older version.
func TestPollerSameVersionChange(t *testing.T) {
	s := newScripted(t,
		step{status: 200, header: map[string]string{"ETag": `"1"`}, body: snapshotBody("m-1", "active", 3, 0.5)},
		step{status: 200, header: map[string]string{"ETag": `"2"`}, body: snapshotBody("m-1", "resolved", 3, 0.5)},
		step{status: 200, header: map[string]string{"ETag": `"3"`}, body: snapshotBody("m-1", "resolved", 3, 0.5)},
		step{status: 200, header: map[string]string{"ETag": `"4"`}, body: snapshotBody("m-1", "active", 2, 0.4)},
		step{status: 304},
		step{status: 200, header: map[string]string{"ETag": `"6"`}, body: snapshotBody("m-1", "resolved", 4, 0.7)},
	)
	c := scriptedClient(t, s)
	p, err := c.NewPoller([]string{"m-1"}, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 6 {
		prices, err := p.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		round := "none"
		if len(prices) == 1 {
			round = fmt.Sprintf("%s@%d %s", prices[0].MarketID, prices[0].Version, prices[0].Status)
		} else if len(prices) > 1 {
			t.Fatalf("%d prices in a round of one market", len(prices))
		}
		got = append(got, round)
	}
	want := []string{"m-1@3 active", "m-1@3 resolved", "none", "none", "none", "m-1@4 resolved"}
	if !slices.Equal(got, want) {
		t.Fatalf("rounds handed over %q, want %q", got, want)
	}
}

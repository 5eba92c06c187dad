package servicetest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// getAs reads path from node with secret and returns the status and body.
func getAs(t *testing.T, node *Node, secret, path string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, node.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestService runs a world of two API nodes end to end: a seeded world is
// served by both, a published trade and price show, a node stopped and
// killed comes back at its URL (even with its old ports taken meanwhile),
// and the CLI's revocation takes effect.
func TestService(t *testing.T) {
	s := Start(t, Options{APINodes: 2, Env: map[string]string{"MD_RATE_LIMIT": "5000"}})
	key := s.NewKey()
	w := s.Seed("st", 3, 2)
	if len(w.Events) != 3 || len(w.Markets) != 6 || len(w.Prices) != 6 {
		t.Fatalf("world: %d events, %d markets, %d prices; want 3, 6, 6", len(w.Events), len(w.Markets), len(w.Prices))
	}
	for _, n := range s.APIs {
		status, body := getAs(t, n, key.Secret, "/public/v1/events?limit=100")
		var page struct {
			Data []struct {
				UniversalID string `json:"universal_id"`
			} `json:"data"`
		}
		if status != 200 || json.Unmarshal(body, &page) != nil || len(page.Data) != 3 || page.Data[0].UniversalID != "st-e001" {
			t.Fatalf("%s /events: %d %s; want the 3 seeded events", n.Name, status, body)
		}
		status, body = getAs(t, n, key.Secret, "/public/v1/key")
		var k struct {
			Limit int `json:"limit"`
		}
		if status != 200 || json.Unmarshal(body, &k) != nil || k.Limit != 5000 {
			t.Fatalf("%s /key: %d %s; want limit 5000 (Options.Env)", n.Name, status, body)
		}
	}

	s.PutTrade(&Trade{MarketID: w.Markets[0].ID, TradeID: "t1", Price: 0.4, Size: 3})
	p := &Price{MarketID: w.Markets[0].ID, Quotes: map[string]Quote{"venue_c": {Bid: 0.3, Ask: 0.5, Last: 0.4}}}
	s.PutPrice(p)
	if p.Version != 2 {
		t.Errorf("second price's version: got %d, want 2 (one above the seeded one)", p.Version)
	}

	api := s.APIs[1]
	url := api.URL()
	api.proxy.mu.Lock()
	oldHTTP := api.proxy.target
	api.proxy.mu.Unlock()
	oldAdmin := api.AdminAddr
	api.Stop()
	if api.Running() {
		t.Fatal("api2 runs after Stop")
	}
	if _, err := http.Get(api.URL() + "/public/v1/key"); err == nil {
		t.Fatal("api2 answers after Stop")
	}
	// While it is down, other processes take the ports it had (what
	// another package's test may do under go test -p 2): it starts
	// anyway, at the same URL.
	for _, addr := range []string{oldHTTP, oldAdmin} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s already taken again: %v", addr, err)
			continue
		}
		defer ln.Close()
	}
	api.Start()
	if api.URL() != url {
		t.Fatalf("api2's URL after a restart: %s, want %s", api.URL(), url)
	}
	if status, body := getAs(t, api, key.Secret, "/public/v1/events/st-e001"); status != 200 {
		t.Fatalf("api2 restarted while its old ports are taken: %d %s", status, body)
	}
	api.Kill()
	api.Start()
	if status, body := getAs(t, api, key.Secret, "/public/v1/events/st-e002"); status != 200 {
		t.Fatalf("api2 after restarts: %d %s", status, body)
	}

	s.RevokeKey(key.KeyID)
	s.Await("the revoked key refused", func() (bool, string) {
		status, body := getAs(t, api, key.Secret, "/public/v1/key")
		return status == http.StatusUnauthorized, string(body)
	})
	other := s.NewKey("markets:read")
	s.WithdrawAccess(other.AccountID)
	s.Await("the key of an account without access refused", func() (bool, string) {
		status, body := getAs(t, s.APIs[0], other.Secret, "/public/v1/key")
		return status == http.StatusForbidden, string(body)
	})
}

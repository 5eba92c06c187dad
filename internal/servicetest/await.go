package servicetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Await polls cond until it reports true, and fails the test with what
// and cond's last note when the wait timeout passes first.
func (s *Service) Await(what string, cond func() (ok bool, note string)) {
	s.t.Helper()
	deadline := time.Now().Add(s.wait)
	for {
		ok, note := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("servicetest: not %s within %s (last: %s)", what, s.wait, note)
		}
		time.Sleep(25 * time.Millisecond) // polling the API: a client has no other way to know
	}
}

// get reads path with the observer key from the first running API node and
// decodes a 200 answer into out; it returns the status.
func (s *Service) get(path string, out any) (int, error) {
	var node *Node
	for _, n := range s.APIs {
		if n.Running() {
			node = n
			break
		}
	}
	if node == nil {
		return 0, errors.New("no API node is running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, node.URL()+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.observer)
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s", strings.TrimSpace(string(body)))
	}
	return resp.StatusCode, json.Unmarshal(body, out)
}

type eventRead struct {
	Title            string     `json:"title"`
	Status           string     `json:"status"`
	UpdatedAt        time.Time  `json:"updated_at"`
	Markets          []itemRead `json:"markets"`
	RecentlyResolved []itemRead `json:"recently_resolved"`
}

type itemRead struct {
	UniversalID string `json:"universal_id"`
	Title       string `json:"title"`
	Status      string `json:"status"`
}

func served(e *Event) bool {
	if e.Status == "merged" {
		return false
	}
	n := 0
	for _, v := range e.Venues {
		if v != "" {
			n++
		}
	}
	return n >= 2
}

func (s *Service) awaitEvent(e *Event) {
	s.t.Helper()
	s.Await("event "+e.ID+" served as published", func() (bool, string) {
		var r eventRead
		status, err := s.get("/public/v1/events/"+e.ID, &r)
		if !served(e) {
			return status == http.StatusNotFound, fmt.Sprintf("status %d %v", status, err)
		}
		if status != http.StatusOK || err != nil {
			return false, fmt.Sprintf("status %d %v", status, err)
		}
		return r.UpdatedAt.Equal(e.UpdatedAt) && r.Title == e.Title,
			fmt.Sprintf("updated_at %v title %q", r.UpdatedAt, r.Title)
	})
}

func (s *Service) awaitMarket(m *Market) {
	s.t.Helper()
	s.Await("market "+m.ID+" served as published", func() (bool, string) {
		var r eventRead
		status, err := s.get("/public/v1/events/"+m.EventID, &r)
		if status != http.StatusOK || err != nil {
			return false, fmt.Sprintf("event %s: status %d %v", m.EventID, status, err)
		}
		for _, x := range append(r.Markets, r.RecentlyResolved...) {
			if x.UniversalID == m.ID {
				return x.Title == m.Title && x.Status == m.Status, fmt.Sprintf("title %q status %q", x.Title, x.Status)
			}
		}
		return false, "not in the event read"
	})
}

// awaitPrices waits until the snapshot serves every price at its version
// or a later one.
func (s *Service) awaitPrices(ps []*Price) {
	s.t.Helper()
	for len(ps) > 0 {
		chunk := ps[:min(50, len(ps))]
		ps = ps[len(chunk):]
		ids := make([]string, len(chunk))
		for i, p := range chunk {
			ids[i] = p.MarketID
		}
		s.Await(fmt.Sprintf("prices of %d markets served (first %s)", len(ids), ids[0]), func() (bool, string) {
			var snap struct {
				Data []struct {
					MarketID string `json:"market_id"`
					Version  int64  `json:"version"`
				} `json:"data"`
				Missing []string `json:"missing"`
			}
			status, err := s.get("/public/v1/prices/snapshot?ids="+strings.Join(ids, ","), &snap)
			if status != http.StatusOK || err != nil {
				return false, fmt.Sprintf("status %d %v", status, err)
			}
			got := make(map[string]int64, len(snap.Data))
			for _, d := range snap.Data {
				got[d.MarketID] = d.Version
			}
			for _, p := range chunk {
				if got[p.MarketID] < p.Version {
					return false, fmt.Sprintf("market %s at version %d, want %d (missing %v)", p.MarketID, got[p.MarketID], p.Version, snap.Missing)
				}
			}
			return true, ""
		})
	}
}

// World is what Seed published: served events, each with its active
// markets, each market with a price.
type World struct {
	Events  []*Event
	Markets []*Market // event by event, in order
	Prices  []*Price  // one per market, in the order of Markets
}

// Seed publishes a world of events (ids prefix+"-e001", …, in ascending
// order) with marketsPerEvent active markets each (ids <event>+"-m1", …)
// and a price per market, and waits until the API serves all of it. The
// events' venue ids vary: every event has venue_a and venue_b, every
// second one venue_c too, every third one venue_d; their volumes fall with
// the index. Categories alternate between "politics" and "sports".
func (s *Service) Seed(prefix string, events, marketsPerEvent int) *World {
	s.t.Helper()
	w := &World{}
	for i := 1; i <= events; i++ {
		id := fmt.Sprintf("%s-e%03d", prefix, i)
		e := &Event{
			ID: id, Title: fmt.Sprintf("Seeded event %d of %s", i, prefix),
			Category: []string{"politics", "sports"}[i%2],
			Venues:   [4]string{"A-" + id, "b-" + strings.ToLower(id), "", ""},
			Volume:   float64(100000 - i*10),
		}
		if i%2 == 0 {
			e.Venues[2] = "C" + id
		}
		if i%3 == 0 {
			e.Venues[3] = "D" + id
		}
		s.PublishEvent(e)
		w.Events = append(w.Events, e)
	}
	for _, e := range w.Events {
		for j := 1; j <= marketsPerEvent; j++ {
			id := fmt.Sprintf("%s-m%d", e.ID, j)
			m := &Market{ID: id, EventID: e.ID, Title: fmt.Sprintf("Market %d of %s", j, e.ID),
				Venues: map[string]string{"venue_a": "A-" + id, "venue_b": "b-" + id}}
			s.PublishMarket(m)
			w.Markets = append(w.Markets, m)
		}
	}
	for i, m := range w.Markets {
		bid := float64(10+i%80) / 100
		p := &Price{MarketID: m.ID, Quotes: map[string]Quote{
			"venue_a": {Bid: bid, Ask: bid + 0.02, Last: bid + 0.01, Volume24h: 1000},
			"venue_b": {Bid: bid - 0.01, Ask: bid + 0.01, Last: bid, Volume24h: 500},
		}}
		s.PublishPrice(p)
		w.Prices = append(w.Prices, p)
	}
	for _, e := range w.Events {
		s.Await("event "+e.ID+" served with its markets", func() (bool, string) {
			var r eventRead
			status, err := s.get("/public/v1/events/"+e.ID, &r)
			if status != http.StatusOK || err != nil {
				return false, fmt.Sprintf("status %d %v", status, err)
			}
			return r.UpdatedAt.Equal(e.UpdatedAt) && len(r.Markets) == marketsPerEvent,
				fmt.Sprintf("updated_at %v, %d markets", r.UpdatedAt, len(r.Markets))
		})
	}
	s.awaitPrices(w.Prices)
	return w
}

package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// answer is one HTTP answer of an API node.
type answer struct {
	status int
	etag   string
	body   string
	header http.Header
}

var httpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
}

// get sends GET path to an API node with the secret and extra headers.
func get(ctx context.Context, node *child, path, secret string, headers ...string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+node.http+path, nil)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, etag: resp.Header.Get("ETag"), body: string(b), header: resp.Header}, nil
}

// getT is get that fails the test on a transport error.
func getT(t *testing.T, node *child, path, secret string, headers ...string) answer {
	t.Helper()
	a, err := get(context.Background(), node, path, secret, headers...)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", path, node.name, err)
	}
	return a
}

// probe is a read route and the answer every node must give.
type probe struct {
	path string
	want answer
}

// world names the entities the tests read and write: events and markets of
// the synthetic world split in disjoint sets, so that one test's writes never
// change another's expected answers.
type world struct {
	events []string
	// read are markets whose answers the probes pin; churnRedis and
	// churnNATS receive price updates from the failover tests; lagged are
	// markets whose Redis documents a test sets behind (nobody reads them);
	// streamed are the markets the stream tests subscribe to and move.
	read, churnRedis, churnNATS, lagged, streamed []string
}

// discover lists served events and their active markets through api1.
func (s *suite) discover(t *testing.T) world {
	t.Helper()
	var list struct {
		Data []struct {
			ID string `json:"universal_id"`
		} `json:"data"`
	}
	a := getT(t, s.apis[0], "/public/v1/events?limit=100", s.secret)
	if a.status != http.StatusOK {
		t.Fatalf("GET /events: %d %s", a.status, a.body)
	}
	if err := json.Unmarshal([]byte(a.body), &list); err != nil {
		t.Fatal(err)
	}
	var w world
	var markets [][]string
	for _, e := range list.Data {
		w.events = append(w.events, e.ID)
	}
	for _, e := range list.Data {
		if len(markets) >= 40 {
			break
		}
		var ev struct {
			Markets []struct {
				ID string `json:"universal_id"`
			} `json:"markets"`
		}
		a := getT(t, s.apis[0], "/public/v1/events/"+e.ID, s.secret)
		if a.status != http.StatusOK {
			t.Fatalf("GET /events/%s: %d %s", e.ID, a.status, a.body)
		}
		if err := json.Unmarshal([]byte(a.body), &ev); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range ev.Markets {
			ids = append(ids, m.ID)
		}
		markets = append(markets, ids)
	}
	if len(w.events) <= 40 {
		t.Fatalf("the synthetic world serves %d events, want more than 40", len(w.events))
	}
	take := func(from, to int) []string {
		var ids []string
		for _, m := range markets[from:to] {
			ids = append(ids, m...)
		}
		return ids
	}
	w.read, w.churnRedis, w.churnNATS, w.lagged = take(0, 4), take(10, 18), take(20, 28), take(30, 34)
	w.streamed = take(34, 40)
	if len(w.read) < 2 || len(w.churnRedis) == 0 || len(w.churnNATS) == 0 || len(w.lagged) < 2 || len(w.streamed) < 6 {
		t.Fatalf("too few active markets: %d read, %d redis, %d nats, %d lagged, %d streamed",
			len(w.read), len(w.churnRedis), len(w.churnNATS), len(w.lagged), len(w.streamed))
	}
	return w
}

// paths are the read routes the probes pin: every route of contract §3 that
// markets:read reaches, and /key. The account routes are not served yet on
// this code (404 "no such route"); add them when they are (usage counts the
// probes themselves, so only /account/keys fits).
func (s *suite) paths(t *testing.T, w world) []string {
	t.Helper()
	ps := []string{
		"/public/v1/key",
		"/public/v1/markets/search?q=&limit=10",
		"/public/v1/markets/search?q=" + url.QueryEscape(firstWord(t, s, w.events[0])) + "&limit=5",
		"/public/v1/events?limit=20",
		"/public/v1/events?limit=10&min_venues=3",
		"/public/v1/prices/snapshot?ids=" + strings.Join(w.read[:min(len(w.read), 20)], ","),
	}
	for _, e := range w.events[:3] {
		ps = append(ps, "/public/v1/events/"+e)
	}
	for _, m := range w.read[:2] {
		ps = append(ps, "/public/v1/markets/"+m+"/trades?limit=20")
	}
	// A second page, through a cursor: cursors are signed alike on every node.
	var page struct {
		Next *string `json:"next_cursor"`
	}
	a := getT(t, s.apis[0], "/public/v1/events?limit=5", s.secret)
	if err := json.Unmarshal([]byte(a.body), &page); err != nil || page.Next == nil {
		t.Fatalf("GET /events?limit=5: no next_cursor in %s (%v)", a.body, err)
	}
	ps = append(ps, "/public/v1/events?limit=5&cursor="+url.QueryEscape(*page.Next))
	return ps
}

func firstWord(t *testing.T, s *suite, event string) string {
	t.Helper()
	var ev struct {
		Title string `json:"title"`
	}
	a := getT(t, s.apis[0], "/public/v1/events/"+event, s.secret)
	if err := json.Unmarshal([]byte(a.body), &ev); err != nil {
		t.Fatal(err)
	}
	word, _, _ := strings.Cut(ev.Title, " ")
	return strings.ToLower(word)
}

// agree waits until every API node answers each path with the same status,
// body and ETag (nodes may hold a page or a price up to 2 s after a change),
// and returns those answers as probes.
func (s *suite) agree(t *testing.T, nodes []*child, paths []string) []probe {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		probes, diff := s.collect(t, nodes, paths)
		if diff == "" {
			return probes
		}
		if time.Now().After(deadline) {
			t.Fatalf("API nodes still disagree after 20 s: %s", diff)
		}
		time.Sleep(250 * time.Millisecond) // polling interval
	}
}

// collect reads every path on every node; diff describes the first
// disagreement or a non-200 answer.
func (s *suite) collect(t *testing.T, nodes []*child, paths []string) ([]probe, string) {
	t.Helper()
	var probes []probe
	for _, p := range paths {
		var first answer
		for i, n := range nodes {
			a := getT(t, n, p, s.secret)
			if a.status != http.StatusOK {
				return nil, fmt.Sprintf("%s on %s: %d %s", p, n.name, a.status, a.body)
			}
			if a.etag == "" && !strings.HasSuffix(p, "/key") {
				return nil, fmt.Sprintf("%s on %s: no ETag", p, n.name)
			}
			if i == 0 {
				first = a
				continue
			}
			if a.body != first.body || a.etag != first.etag {
				return nil, fmt.Sprintf("%s: %s answers ETag %s body %.300s; %s answers ETag %s body %.300s",
					p, nodes[0].name, first.etag, first.body, n.name, a.etag, a.body)
			}
		}
		probes = append(probes, probe{path: p, want: first})
	}
	return probes, ""
}

// snapshotVersions reads /prices/snapshot for ids on a node and returns each
// market's price version (0 when missing).
func snapshotVersions(ctx context.Context, node *child, secret string, ids []string) (map[string]int64, error) {
	got := map[string]int64{}
	for chunk := range slices.Chunk(ids, 50) {
		a, err := get(ctx, node, "/public/v1/prices/snapshot?ids="+strings.Join(chunk, ","), secret)
		if err != nil {
			return nil, err
		}
		if a.status != http.StatusOK {
			return nil, fmt.Errorf("snapshot on %s: %d %s", node.name, a.status, a.body)
		}
		var snap struct {
			Data []struct {
				MarketID string `json:"market_id"`
				Version  int64  `json:"version"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(a.body), &snap); err != nil {
			return nil, err
		}
		for _, p := range snap.Data {
			got[p.MarketID] = p.Version
		}
	}
	return got, nil
}

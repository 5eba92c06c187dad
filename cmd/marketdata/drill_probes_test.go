package main

// Probes of the fault drills: requests, /readyz polling, the read routes a
// node serves, and a checked load.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// get sends a GET with the key and returns the status and body.
func get(client *http.Client, base, path, secret string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+base+path, nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// readyz returns /readyz's status and body.
func readyz(t *testing.T, admin string) (int, string) {
	t.Helper()
	code, body, err := get(http.DefaultClient, admin, "/readyz", "")
	if err != nil {
		return 0, err.Error()
	}
	return code, body
}

// waitReadyz polls /readyz until its status is want and ok(body) holds
// (nil: any body), and fails the test after within.
func waitReadyz(t *testing.T, admin string, want int, ok func(string) bool, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	var code int
	var body string
	for {
		code, body = readyz(t, admin)
		if code == want && (ok == nil || ok(body)) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of %s: got %d %s, want %d within %s", admin, code, body, want, within)
		}
		time.Sleep(50 * time.Millisecond) // polling readiness
	}
}

// readRoutes returns a path on every read route, from what the node serves.
func readRoutes(t *testing.T, api, secret string) []string {
	t.Helper()
	code, body, err := get(http.DefaultClient, api, "/public/v1/events?limit=100", secret)
	if err != nil || code != 200 {
		t.Fatalf("/events: %d %s %v", code, body, err)
	}
	var list struct {
		Data []struct {
			ID    string `json:"universal_id"`
			Title string `json:"title"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Data) < 2 {
		t.Fatalf("/events: %s (%v), want at least 2 events", body, err)
	}
	paths := []string{"/public/v1/key", "/public/v1/events?limit=100", "/public/v1/events?limit=3",
		"/public/v1/markets/search?q=&limit=50", "/public/v1/markets/search?q=" + strings.ToLower(strings.Fields(list.Data[0].Title)[0])}
	var markets []string
	for _, e := range list.Data[:2] {
		path := "/public/v1/events/" + e.ID
		paths = append(paths, path)
		code, body, err := get(http.DefaultClient, api, path, secret)
		if err != nil || code != 200 {
			t.Fatalf("%s: %d %s %v", path, code, body, err)
		}
		var ev struct {
			Markets []struct {
				ID string `json:"universal_id"`
			} `json:"markets"`
		}
		if err := json.Unmarshal([]byte(body), &ev); err != nil {
			t.Fatalf("%s: %v in %s", path, err, body)
		}
		for _, m := range ev.Markets {
			markets = append(markets, m.ID)
		}
	}
	if len(markets) == 0 {
		t.Fatal("no markets in the first events")
	}
	paths = append(paths, "/public/v1/prices/snapshot?ids="+strings.Join(markets, ","),
		"/public/v1/markets/"+markets[0]+"/trades")
	return paths
}

// snapshot reads every path and returns the bodies (all must be 200).
func snapshot(t *testing.T, api, secret string, paths []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range paths {
		code, body, err := get(http.DefaultClient, api, p, secret)
		if err != nil || code != 200 {
			t.Fatalf("%s: %d %s %v", p, code, body, err)
		}
		out[p] = body
	}
	return out
}

// tally counts a load's answers.
type tally struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	codes  map[int]int
	wrong  []string
	errors int
}

func (ta *tally) add(code int, wrong string) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	if ta.codes == nil {
		ta.codes = map[int]int{}
	}
	ta.codes[code]++
	if wrong != "" && len(ta.wrong) < 5 {
		ta.wrong = append(ta.wrong, wrong)
	}
}

// load reads every path with secret in a loop from workers goroutines until
// stop is closed, checking each answer: a 200 must carry the body of want;
// ok decides which other statuses are acceptable.
func load(api, secret string, paths []string, want map[string]string, workers int, stop <-chan struct{}, ok func(code int, body string) bool) *tally {
	ta := &tally{}
	client := &http.Client{Timeout: 10 * time.Second}
	for w := range workers {
		ta.wg.Add(1)
		go func() {
			defer ta.wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Paced: a steady load, not a benchmark on shared cores.
				time.Sleep(2 * time.Millisecond)
				p := paths[i%len(paths)]
				code, body, err := get(client, api, p, secret)
				switch {
				case err != nil:
					ta.mu.Lock()
					ta.errors++
					ta.mu.Unlock()
				case code == 200 && body != want[p]:
					ta.add(code, fmt.Sprintf("%s: body %.200s, want %.200s", p, body, want[p]))
				case code != 200 && !ok(code, body):
					ta.add(code, fmt.Sprintf("%s: %d %.200s", p, code, body))
				default:
					ta.add(code, "")
				}
			}
		}()
	}
	return ta
}

// wait waits for the load's workers to stop (after stop is closed).
func (ta *tally) wait() { ta.wg.Wait() }

// total is the number of answers.
func (ta *tally) total() int {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	n := 0
	for _, c := range ta.codes {
		n += c
	}
	return n
}

func (ta *tally) String() string {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return fmt.Sprintf("codes %v, transport errors %d, wrong %q", ta.codes, ta.errors, ta.wrong)
}

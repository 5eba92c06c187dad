package clustertest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// load reads the probes' routes on every API node from several goroutines
// and checks each answer: a 200 must be exactly the probe's answer, 503 is
// the only other status allowed.
type load struct {
	mu      sync.Mutex
	counts  map[int]int
	last503 map[string]time.Time // node → time of its latest 503
	errs    []string
	// degraded counts the /readyz answers reporting a degraded dependency.
	degraded map[string]int
	total    int
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

func startLoad(t *testing.T, s *suite, probes []probe, workers int) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{counts: map[int]int{}, last503: map[string]time.Time{}, degraded: map[string]int{}, stop: cancel}
	for w := range workers {
		l.wg.Go(func() {
			for i := w; ctx.Err() == nil; i++ {
				p := probes[i%len(probes)]
				node := s.apis[(i/len(probes)+w)%len(s.apis)]
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				a, err := get(rctx, node, p.path, s.secret)
				rcancel()
				if ctx.Err() != nil {
					return
				}
				l.record(node, p, a, err)
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}
	// /readyz of every node: a shard the node can route around (reads from
	// Postgres) leaves it ready, perhaps degraded; a 503 would drain them all.
	for _, n := range s.apis {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				code, body, err := n.readyz(ctx)
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				switch {
				case err != nil:
					l.fail("%s /readyz: %v", n.name, err)
				case code != http.StatusOK:
					l.fail("%s /readyz %d during the load: %.300s", n.name, code, body)
				case strings.Contains(body, "degraded"):
					l.degraded[n.name]++
				}
				l.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
	}
	t.Cleanup(l.finish)
	return l
}

func (l *load) record(node *child, p probe, a answer, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	fail := l.fail
	if err != nil {
		l.counts[0]++
		fail("%s on %s: %v", p.path, node.name, err)
		return
	}
	l.counts[a.status]++
	switch a.status {
	case http.StatusOK:
		if a.body != p.want.body || a.etag != p.want.etag {
			fail("wrong answer: %s on %s: ETag %s body %.300s, want ETag %s body %.300s", p.path, node.name, a.etag, a.body, p.want.etag, p.want.body)
		}
	case http.StatusServiceUnavailable:
		l.last503[node.name] = time.Now()
	default:
		fail("%s on %s: status %d %.300s", p.path, node.name, a.status, a.body)
	}
}

// fail records an error; l.mu is held.
func (l *load) fail(format string, args ...any) {
	if len(l.errs) < 20 {
		l.errs = append(l.errs, fmt.Sprintf(format, args...))
	}
}

// served is how many requests were answered so far.
func (l *load) served() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// finish stops the load and waits for its requests to end.
func (l *load) finish() {
	l.stop()
	l.wg.Wait()
}

// check fails the test with the wrong answers and statuses seen.
func (l *load) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		t.Error(e)
	}
	t.Logf("load: %d requests, statuses %v; /readyz answers reporting degraded: %v", l.total, l.counts, l.degraded)
}

// waitServed waits until the load has answered n more requests.
func (l *load) waitServed(t *testing.T, n int) {
	t.Helper()
	target := l.served() + n
	deadline := time.Now().Add(30 * time.Second)
	for l.served() < target {
		if time.Now().After(deadline) {
			t.Fatalf("load answered %d requests in 30 s, want %d", l.served(), target)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

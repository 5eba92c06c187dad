// Package lbtest runs marketdata behind HAProxy on loopback (deploy/local/lb.sh, with
// deploy/haproxy/haproxy.cfg) and holds what operators rely on through the balancer: polls
// and streams work, the failed-authentication limit counts the client's address, and rolling
// restarts of the API nodes and of ingest lose nothing.
package lbtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/internal/servicetest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// The topology's addresses; deploy/local/lb.sh owns the same numbers.
const lbURL = "http://127.0.0.1:32480"

var adminPorts = []int{32491, 32492, 32493}

// topology is a world of the test's own (servicetest: database, Redis prefix, NATS stream,
// ingest) with lb.sh's HAProxy and three API nodes in it.
type topology struct {
	t      *testing.T
	svc    *servicetest.Service
	script string
	env    []string
	dir    string
}

// start runs the world and `lb.sh up` in it; `lb.sh down` runs when the test ends, and the
// logs of HAProxy and the nodes are shown if it failed.
func start(t *testing.T, opts servicetest.Options) *topology {
	t.Helper()
	testenv.Integration(t, "PostgreSQL, Redis, NATS, HAProxy and the marketdata binary")
	haproxyPath(t)
	script, err := filepath.Abs("../../deploy/local/lb.sh")
	if err != nil {
		t.Fatal(err)
	}
	lockTopology(t)
	svc := servicetest.Start(t, opts)
	tp := &topology{t: t, svc: svc, script: script, dir: lbDir}
	tp.env = append(svc.Env(), "LB_DIR="+tp.dir, "LB_BIN="+servicetest.Binary(t),
		// The nodes follow this world's change notices, not the default subject's.
		"LB_API_ARGS=--notice-subject "+svc.Names.NoticeSubject)
	// A run killed before its cleanup left its processes, found by their pid files here.
	if _, err := tp.lb("down"); err != nil {
		t.Fatalf("stopping what an earlier run left: %v", err)
	}
	for _, name := range []string{"haproxy", "api1", "api2", "api3"} {
		_ = os.Remove(filepath.Join(tp.dir, name+".log")) // the logs shown on failure are this test's
	}
	t.Cleanup(func() {
		if _, err := tp.lb("down"); err != nil {
			t.Errorf("lb.sh down: %v", err)
		}
		if t.Failed() {
			for _, name := range []string{"haproxy", "api1", "api2", "api3"} {
				b, _ := os.ReadFile(filepath.Join(tp.dir, name+".log"))
				if len(b) > 32<<10 {
					b = b[len(b)-32<<10:]
				}
				t.Logf("log of %s:\n%s", name, b)
			}
		}
	})
	tp.mustLB("up")
	return tp
}

// lbDir holds the topology's pid files and logs: one fixed directory, so that a run killed
// before its cleanup leaves processes the next run finds and stops.
const lbDir = "/tmp/marketdata-lbtest"

// lockTopology holds the topology's ports (fixed, as lb.sh's) for the test: another go test
// process running this suite (another checkout) waits for it.
func lockTopology(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile("/tmp/marketdata-lbtest.lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() }) // closing releases the lock
}

// haproxyPath finds Debian's haproxy, which installs in /usr/sbin (not on every user's PATH).
func haproxyPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy"
	}
	testenv.Unavailable(t, "haproxy (`make haproxy` installs Debian's package)", errors.New("not on PATH nor in /usr/sbin"))
	return ""
}

// lb runs deploy/local/lb.sh with args in the world's environment.
func (tp *topology) lb(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{tp.script}, args...)...)
	cmd.Env = tp.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("lb.sh %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (tp *topology) mustLB(args ...string) {
	tp.t.Helper()
	if _, err := tp.lb(args...); err != nil {
		tp.t.Fatal(err)
	}
}

// httpFrom is an HTTP client whose connections come from the loopback address ip (any of
// 127.0.0.0/8 is this machine's), so the balancer sees several client addresses.
func httpFrom(ip string, keepAlive bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: d.DialContext, DisableKeepAlives: !keepAlive,
			MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute,
		},
	}
}

// get sends GET path to the balancer with the key (none when ""); it returns the status,
// the body and the Retry-After header.
func get(hc *http.Client, path, key string, header ...string) (int, []byte, string, error) {
	req, err := http.NewRequest(http.MethodGet, lbURL+path, nil)
	if err != nil {
		return 0, nil, "", err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, resp.Header.Get("Retry-After"), err
}

// snapshotPath is the snapshot route of ids.
func snapshotPath(ids []string) string {
	return "/public/v1/prices/snapshot?ids=" + strings.Join(ids, ",")
}

// versions decodes a snapshot's body into market → version.
func versions(body []byte) (map[string]int64, error) {
	var s struct {
		Data []struct {
			MarketID string `json:"market_id"`
			Version  int64  `json:"version"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(s.Data))
	for _, p := range s.Data {
		out[p.MarketID] = p.Version
	}
	return out, nil
}

// nodeRequests is what node i's /metrics counts in marketdata_http_requests_total for route.
func nodeRequests(t *testing.T, i int, route string) float64 {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(adminPorts[i]) + "/metrics")
	if err != nil {
		t.Fatalf("metrics of api%d: %v", i+1, err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "marketdata_http_requests_total{") || !strings.Contains(line, `route="`+route+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics of api%d: %q: %v", i+1, line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("metrics of api%d: %v", i+1, err)
	}
	return sum
}

// publisher publishes price updates to the world's subjects from any goroutine (servicetest's
// Publish fails the test, so it belongs to the test's goroutine), remembering when each
// version was published.
type publisher struct {
	js     jetstream.JetStream
	prefix string

	mu        sync.Mutex
	version   map[string]int64
	published map[string]map[int64]time.Time
	trades    map[string][]string // market → trade ids published
}

func newPublisher(t *testing.T, svc *servicetest.Service, w *servicetest.World) *publisher {
	t.Helper()
	nc, err := nats.Connect(testenv.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := &publisher{js: js, prefix: svc.Names.SubjectPrefix, version: map[string]int64{}, published: map[string]map[int64]time.Time{}, trades: map[string][]string{}}
	for _, pr := range w.Prices {
		p.version[pr.MarketID] = pr.Version
		p.published[pr.MarketID] = map[int64]time.Time{}
	}
	return p
}

// next publishes market id's next version; it returns it.
func (p *publisher) next(ctx context.Context, id string) (int64, error) {
	p.mu.Lock()
	p.version[id]++
	v := p.version[id]
	p.mu.Unlock()
	bid := 0.30 + float64(v%40)/100
	body := fmt.Sprintf(`{"market_id":%q,"version":%d,"ts":%q,"quotes":{"venue_a":{"bid":%.2f,"ask":%.2f,"last":%.2f,"volume_24h":1000}}}`,
		id, v, time.Now().UTC().Format(time.RFC3339Nano), bid, bid+0.02, bid+0.01)
	subject := p.prefix + ".price." + id
	if _, err := p.js.Publish(ctx, subject, []byte(body), jetstream.WithMsgID(subject+"."+strconv.FormatInt(v, 10))); err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.published[id][v] = time.Now()
	p.mu.Unlock()
	return v, nil
}

// trade publishes a trade of market id; it returns its id.
func (p *publisher) trade(ctx context.Context, id string, n int) (string, error) {
	tid := fmt.Sprintf("%s-t%05d", id, n)
	body := fmt.Sprintf(`{"market_id":%q,"trade_id":%q,"venue":"venue_a","price":0.42,"size":%d,"side":"buy","ts":%q}`,
		id, tid, 1+n%50, time.Now().UTC().Format(time.RFC3339Nano))
	subject := p.prefix + ".trade." + id
	if _, err := p.js.Publish(ctx, subject, []byte(body), jetstream.WithMsgID(subject+"."+tid)); err != nil {
		return "", err
	}
	p.mu.Lock()
	p.trades[id] = append(p.trades[id], tid)
	p.mu.Unlock()
	return tid, nil
}

// tradeIDs is every trade published, by market.
func (p *publisher) tradeIDs() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string][]string, len(p.trades))
	for id, ts := range p.trades {
		out[id] = append([]string(nil), ts...)
	}
	return out
}

// last is every market's last published version.
func (p *publisher) last() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.version))
	for id, v := range p.version {
		out[id] = v
	}
	return out
}

// publishedAt is when version v of id was published (zero if it was not by this publisher).
func (p *publisher) publishedAt(id string, v int64) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.published[id][v]
}

// run publishes one update every `every`, round-robin over ids, and with tradeEvery > 0 a
// trade with every tradeEvery-th update, until ctx ends; it returns the first error.
func (p *publisher) run(ctx context.Context, ids []string, every time.Duration, tradeEvery int) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.next(pctx, ids[i%len(ids)])
		if err == nil && tradeEvery > 0 && i%tradeEvery == 0 {
			_, err = p.trade(pctx, ids[(i/tradeEvery)%len(ids)], i)
		}
		cancel()
		if err != nil {
			return err
		}
	}
}

func marketIDs(w *servicetest.World) []string {
	ids := make([]string, len(w.Markets))
	for i, m := range w.Markets {
		ids[i] = m.ID
	}
	return ids
}

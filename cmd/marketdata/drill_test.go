package main

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// Fault drills (issue 8): each stops, kills or restarts a service of its
// own (internal/testenv private instances) under a running node and checks
// what clients get. Shared services are used only through names of the
// drill's own.

// sharedRedis gives the drill the shared Redis under a prefix of its own.
func (d *drill) sharedRedis() {
	d.t.Helper()
	_, prefix := testenv.Redis(d.t)
	d.env["MD_REDIS_URL"] = testenv.RedisURL
	d.env["MD_REDIS_PREFIX"] = prefix
}

// sharedNATS gives the drill the shared NATS with stream names of its own
// (deleted when the test ends).
func (d *drill) sharedNATS() {
	d.t.Helper()
	_, names := testenv.NATS(d.t)
	d.env["MD_NATS_URL"] = testenv.NATSURL
	d.ic.Stream, d.ic.SubjectPrefix, d.ic.DLQStream, d.ic.DLQPrefix, d.ic.NoticeSubject =
		names.Stream, names.SubjectPrefix, names.DLQStream, names.DLQPrefix, names.NoticeSubject
}

// metricValue returns the value of a metric line starting with series.
func metricValue(t *testing.T, admin, series string) float64 {
	t.Helper()
	_, body, err := get(http.DefaultClient, admin, "/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// pollStatus polls path until it answers want; it returns how long it took.
func pollStatus(t *testing.T, api, path, secret string, want int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var code int
	var body string
	for time.Since(start) < within {
		code, body, _ = get(http.DefaultClient, api, path, secret)
		if code == want {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond) // polling an answer
	}
	t.Fatalf("%s: got %d %s, want %d within %s", path, code, body, want, within)
	return 0
}

// TestDrillPostgresPrimaryDown: Redis holds all data and the key was used;
// the primary stops for 15 s under load: every read route keeps answering
// 200 with the same bodies as before (keys from the node's memory, data
// from Redis), an unknown key never gets 200, /readyz stays 200 with
// postgres degraded; the primary starts again: a new key works and a
// revocation takes effect within the contract's second.
func TestDrillPostgresPrimaryDown(t *testing.T) {
	pg := testenv.StartPostgres(t)
	d := newDrill(t, pg.URL("marketdata"), "", "")
	d.sharedRedis()
	d.sharedNATS()
	d.migrate()
	d.startIngest()
	d.feed(300)
	d.caughtUp(30 * time.Second)
	keyID, secret := d.newKey()
	api := d.startAPI()
	waitReadyz(t, api.admin, 200, nil, 30*time.Second)
	paths := readRoutes(t, api.http, secret)
	want := snapshot(t, api.http, secret, paths)

	pg.Stop()
	stop := make(chan struct{})
	ta := load(api.http, secret, paths, want, 4, stop, func(int) bool { return false })
	unknown := store.NewSecret()
	deadline := time.Now().Add(15 * time.Second)
	probes := 0
	for time.Now().Before(deadline) {
		// The drill's length is the outage's, not a stand-in for an event.
		time.Sleep(500 * time.Millisecond)
		code, body, _ := get(http.DefaultClient, api.http, "/public/v1/key", unknown)
		if code != http.StatusServiceUnavailable && code != http.StatusUnauthorized {
			t.Errorf("unknown key while the primary is down: %d %s, want 503 or 401", code, body)
		}
		if code, body := readyz(t, api.admin); code != 200 || !strings.Contains(body, `"postgres":`) || !strings.Contains(body, `"status":"degraded"`) {
			t.Errorf("/readyz while the primary is down: %d %s, want 200 degraded naming postgres", code, body)
		}
		probes++
	}
	close(stop)
	ta.wait()
	if ta.wrong != nil || ta.errors > 0 || ta.codes[200] != ta.total() || ta.total() < 50 {
		t.Errorf("load during the 15 s outage: %s; want only 200s with the bodies from before", ta)
	}
	t.Logf("primary down 15 s: %d answers, %s; %d unknown-key probes", ta.total(), ta, probes)
	if v := metricValue(t, api.admin, "marketdata_api_keys_served_stale_total"); v == 0 {
		t.Error("marketdata_api_keys_served_stale_total: 0, want the stale answers counted")
	}

	pg.Start()
	waitReadyz(t, api.admin, 200, func(b string) bool { return b == `{"status":"ready"}` }, 30*time.Second)
	_, fresh := d.newKey()
	pollStatus(t, api.http, "/public/v1/key", fresh, 200, 10*time.Second)
	wantOK := func() {
		t.Helper()
		if code, body, err := get(http.DefaultClient, api.http, "/public/v1/key", secret); code != 200 {
			t.Fatalf("old key after recovery: %d %s %v", code, body, err)
		}
	}
	wantOK()
	start := time.Now()
	if _, err := run(t, d.env, "key", "revoke", "--key", keyID); err != nil {
		t.Fatal(err)
	}
	took := pollStatus(t, api.http, "/public/v1/key", secret, http.StatusUnauthorized, 5*time.Second)
	t.Logf("revocation after recovery took effect in %s (after the command: %s)", took, time.Since(start))
	if took > 2*time.Second {
		t.Errorf("revocation after recovery took %s, want within 1 s (2 s allowed on shared cores)", took)
	}
}

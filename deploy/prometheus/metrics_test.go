package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/servicetest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// dashboardFile is the committed Grafana dashboard (deploy/grafana).
const dashboardFile = "../grafana/marketdata.json"

// grafanaRanges are Grafana's range variables, replaced by a duration so
// that a query parses as the PromQL Grafana sends.
var grafanaRanges = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// labelValues is a Grafana variable query: label_values(<selector>, <label>).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_]\w*\)$`)

// query is one PromQL expression of the dashboard, with where it is.
type query struct {
	where, expr string
}

// dashboardQueries returns the expression of every panel target and the
// selector of every query variable of the committed dashboard.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var qs []query
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, query{fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), grafanaRanges.Replace(tg.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		s, _ := v.Query.(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("variable %s: query %q, want label_values(<selector>, <label>)", v.Name, v.Query)
			continue
		}
		qs = append(qs, query{"variable " + v.Name, m[1]})
	}
	if len(qs) == 0 {
		t.Fatalf("%s: no query", dashboardFile)
	}
	return qs
}

// selectors returns the metric selectors of a PromQL expression.
func selectors(expr string) ([]*parser.VectorSelector, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out, nil
}

// TestDashboardQueries: every query of the dashboard parses as PromQL, and
// every series it selects is narrowed to the jobs and instances picked in
// the dashboard's variables.
func TestDashboardQueries(t *testing.T) {
	for _, q := range dashboardQueries(t) {
		vss, err := selectors(q.expr)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", q.where, q.expr, err)
			continue
		}
		if strings.HasPrefix(q.where, "variable ") {
			continue // the variables pick job and instance
		}
		for _, vs := range vss {
			for _, want := range []string{"job", "instance"} {
				if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
					return m.Name == want && m.Type == labels.MatchRegexp && m.Value == "$"+want
				}) {
					t.Errorf("%s: %s has no %s=~\"$%s\"", q.where, vs, want, want)
				}
			}
		}
	}
}

// referencedMetrics returns every metric name the alert rules and the
// dashboard select, each with where it is used.
func referencedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	qs := dashboardQueries(t)
	for _, r := range alerts(loadRules(t)) {
		qs = append(qs, query{"alert " + r.Alert, r.Expr})
	}
	names := map[string][]string{}
	for _, q := range qs {
		vss, err := selectors(q.expr)
		if err != nil {
			t.Fatalf("%s: %v", q.where, err)
		}
		for _, vs := range vss {
			if vs.Name == "" {
				t.Errorf("%s: %s selects no metric by name", q.where, vs)
				continue
			}
			if !slices.Contains(names[vs.Name], q.where) {
				names[vs.Name] = append(names[vs.Name], q.where)
			}
		}
	}
	return names
}

// TestReferencedMetrics: the lists of referenced metrics are what the rules
// and the dashboard are about (a parse that found nothing would make
// TestMetricsExported pass vacuously).
func TestReferencedMetrics(t *testing.T) {
	names := referencedMetrics(t)
	for _, want := range []string{
		"marketdata_ingest_freshness_seconds_bucket", // alert and dashboard
		"marketdata_readyz_status",                   // alert and dashboard
		"marketdata_dependency_up",                   // the variables
		"process_resident_memory_bytes",              // dashboard
	} {
		if len(names[want]) == 0 {
			t.Errorf("%s is not among the referenced metrics %v", want, names)
		}
	}
}

// exported returns the series names a /metrics answer holds: each family
// with samples, and a histogram's or summary's _bucket, _sum and _count.
func exported(text string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		case "summary":
			names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
		}
	}
	return names
}

func TestExported(t *testing.T) {
	text := `# HELP a_total Things.
# TYPE a_total counter
a_total{kind="x"} 3
# TYPE b_seconds histogram
b_seconds_bucket{le="+Inf"} 1
b_seconds_sum 0.5
b_seconds_count 1
# TYPE c summary
c_sum 1
c_count 1
`
	got := exported(text)
	for _, want := range []string{"a_total", "b_seconds", "b_seconds_bucket", "b_seconds_sum", "b_seconds_count", "c_sum", "c_count"} {
		if !got[want] {
			t.Errorf("exported: %s missing from %v", want, got)
		}
	}
	if got["c_bucket"] || got["a_total_bucket"] {
		t.Errorf("exported: buckets of a non-histogram in %v", got)
	}
}

// TestMetricsExported: every metric the alert rules and the dashboard name
// is on the /metrics of a running API node or ingest worker (the real
// binary), so renaming a metric in the code fails here. Series that exist
// only once something happened are made to happen: data ingested and read,
// a stream closed by the node (a revoked key: 4401), a cache entry lost
// behind ingest's back and repaired by the anti-entropy pass.
func TestMetricsExported(t *testing.T) {
	want := referencedMetrics(t)
	s := servicetest.Start(t, servicetest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// Ingest applies and the API answers (Seed reads every event back).
	w := s.Seed("metrics", 2, 2)

	// A stream the node closes: its key is revoked.
	key := s.NewKey("markets:read", "stream:read")
	ws, resp, err := websocket.Dial(ctx, "ws://"+s.APIs[0].HTTPAddr+"/public/v1/stream", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + key.Secret}},
	})
	if err != nil {
		t.Fatalf("open a stream: %v", err)
	}
	if resp.Body != nil {
		resp.Body.Close()
	}
	defer ws.CloseNow() //nolint:errcheck // closed by the node already
	s.RevokeKey(key.KeyID)
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			if code := websocket.CloseStatus(err); code != 4401 {
				t.Fatalf("stream after its key was revoked: %v (close code %d), want closed with 4401", err, code)
			}
			break
		}
	}

	// A cache entry lost behind ingest's back, for the anti-entropy pass.
	rdb, _ := testenv.Redis(t)
	lost := cache.New(rdb, s.RedisPrefix, cache.Rules{}).EventKey(w.Events[0].ID)
	if n, err := rdb.Del(ctx, lost).Result(); err != nil || n != 1 {
		t.Fatalf("delete %s: %d deleted, %v", lost, n, err)
	}

	// The anti-entropy pass compares a page every 2 s; the rest is there
	// already.
	deadline := time.Now().Add(time.Minute)
	nodes := []*servicetest.Node{s.APIs[0], s.Ingest}
	var missing []string
	for {
		have := map[string]bool{}
		for _, n := range nodes {
			for name := range exported(scrape(t, n)) {
				have[name] = true
			}
		}
		missing = missing[:0]
		for name := range want {
			if !have[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			t.Logf("all %d metrics the rules and the dashboard name are exported", len(want))
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(missing)
			for _, name := range missing {
				t.Errorf("%s is on neither the API node's nor the ingest worker's /metrics; used by %s", name, strings.Join(want[name], "; "))
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrape returns the /metrics answer of n's admin address.
func scrape(t *testing.T, n *servicetest.Node) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.AdminAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s /metrics: %v", n.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s /metrics: %d %v", n.Name, resp.StatusCode, err)
	}
	return string(b)
}

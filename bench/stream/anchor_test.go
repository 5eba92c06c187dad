package stream

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/bench/world"
)

func TestAnchorDir(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(wd)) // cmd/mdbench → the repository
	got, err := anchorDir("", "/nowhere/bin/marketdata")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Clean(filepath.Join(root, "..", "shared", "anchors", "streams")); got != want {
		t.Errorf("anchorDir = %s, want %s", got, want)
	}
	if got, _ := anchorDir("/elsewhere/streams", ""); got != "/elsewhere/streams" {
		t.Errorf("anchorDir with a flag = %s", got)
	}
	if _, ok := findRepoRoot(t.TempDir()); ok {
		t.Error("found a repository root above a temporary directory")
	}
}

// A missing anchor is said, not skipped silently; in CI it fails the run.
func TestAnchorMissing(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := &world.Options{Bin: "/nowhere/marketdata", Out: t.TempDir()}
	dir := t.TempDir() // no go.mod: not an anchor
	t.Setenv("CI", "")
	res, err := runAnchor(context.Background(), o, Params, dir, log)
	if err != nil || !strings.Contains(res.NotRun, "no anchor at "+dir) || res.Steady != nil {
		t.Errorf("outside CI: %+v, %v; want NotRun naming %s and no error", res, err, dir)
	}
	r := &StreamResult{AnchorRun: res, Anchor: streamAnchor}
	r.summarise()
	if r.AllMet || !strings.Contains(r.Goals[0].Goal, "NOT RUN") {
		t.Errorf("goals without the anchor: all met %v, %q", r.AllMet, r.Goals[0].Goal)
	}
	t.Setenv("CI", "true")
	if _, err := runAnchor(context.Background(), o, Params, dir, log); err == nil {
		t.Error("in CI a missing anchor did not fail")
	}
	if res, err := runAnchor(context.Background(), o, Params, "none", log); err != nil || res.NotRun == "" {
		t.Errorf("-stream.anchor none: %+v, %v", res, err)
	}
}

func TestAnchorLoadResult(t *testing.T) {
	// The fields of the load tool's -json that the benchmark reads.
	raw := `{"config":{"conns":300},"conns_established":300,"conns_failed":1,"conns_dropped":2,
		"pub_rate_achieved":99.9,"expected_deliveries_in_window":4497,"deliveries_in_window":4490,
		"deliveries_per_sec":1499,"lost":3,"duplicates":4,"version_gaps":5,"out_of_order":6,
		"latency_us":{"P50":1240,"P90":2000,"P99":9150,"P999":20000,"Max":26920},
		"latency_from_due_us":{"P50":2000,"P90":3000,"P99":17920,"P999":25000,"Max":26000},
		"per_conn_kb":42.71,"window_seconds":3,"server_cpu_sec":0.3,"server_cpu_us_per_delivery":66.71,"load_cpu_sec":0.36}`
	var l anchorLoadResult
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		t.Fatal(err)
	}
	r := l.run("steady", 10, 100, "x.json")
	want := AnchorRun{Name: "steady", SubsPerConn: 10, Rate: 100, PubRate: 99.9, Seconds: 3, DeliveriesPerS: 1499,
		Expected: 4497, Delivered: 4490, P50MS: 1.24, P99MS: 9.15, MaxMS: 26.92, FromDueP99MS: 17.92,
		CPUPerDelivUS: 66.71, ServerCores: 0.1, LoadCores: 0.12, PerConnKiB: 42.71,
		Lost: 3, Gaps: 5, OutOfOrder: 6, Duplicates: 4, ConnsFailed: 1, ConnsDropped: 2, Result: "x.json"}
	if r != want {
		t.Errorf("run = %+v\nwant %+v", r, want)
	}
	if got := r.ExpectedPerS(); got != 1499 {
		t.Errorf("expected per second %v, want 1499", got)
	}
}

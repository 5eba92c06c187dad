package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// The stream benchmark runs the anchor in the same run: the engine
// under Centrifugo (centrifugal/centrifuge, in-memory broker) and its load
// tool, both from ../shared/anchors/streams beside the repository (its
// README), built into a temporary directory: the anchor's code and
// binaries never enter this repository.

// anchorRel is where the anchor sits, relative to the repository's root.
const anchorRel = "../shared/anchors/streams"

// Anchor load runs' fixed parts: the load tool's drain and settle, and the
// limit of one run beyond its measured time.
const (
	anchorDrain    = 3 * time.Second
	anchorSettle   = 3 * time.Second
	anchorRunSlack = 3 * time.Minute
)

// AnchorRun is one run of the anchor's load tool against a fresh anchor.
type AnchorRun struct {
	Name        string  `json:"name"`
	SubsPerConn int     `json:"subscriptions_per_connection"`
	Rate        float64 `json:"publications_per_s"`
	PubRate     float64 `json:"publications_per_s_achieved"`
	Seconds     float64 `json:"window_seconds"`
	// Deliveries are per second in the window, Expected what the
	// publications in it make to the subscriptions.
	DeliveriesPerS float64 `json:"deliveries_per_s"`
	Expected       int64   `json:"expected_deliveries_in_window"`
	Delivered      uint64  `json:"deliveries_in_window"`
	// Latency is publish → client (receive − the publisher's send time).
	P50MS float64 `json:"publish_to_client_p50_ms"`
	P99MS float64 `json:"publish_to_client_p99_ms"`
	MaxMS float64 `json:"publish_to_client_max_ms"`
	// FromDueP99MS adds the time the publisher was held back.
	FromDueP99MS  float64 `json:"from_due_p99_ms"`
	CPUPerDelivUS float64 `json:"server_cpu_per_delivery_us"`
	ServerCores   float64 `json:"server_cores"`
	LoadCores     float64 `json:"load_tool_cores"`
	PerConnKiB    float64 `json:"memory_per_connection_kib"`
	Lost          int64   `json:"lost"`
	Gaps          int64   `json:"version_gaps"`
	OutOfOrder    int64   `json:"out_of_order"`
	Duplicates    int64   `json:"duplicates"`
	ConnsFailed   int     `json:"connections_failed"`
	ConnsDropped  int     `json:"connections_dropped"`
	Result        string  `json:"result_file"`
}

// AnchorResult is the anchor's side of the stream benchmark.
type AnchorResult struct {
	Dir string `json:"dir"`
	// NotRun says why the anchor did not run ("" when it did).
	NotRun       string      `json:"not_run,omitempty"`
	BuildSeconds float64     `json:"build_seconds"`
	Steady       *AnchorRun  `json:"steady,omitempty"`
	Ramp         []AnchorRun `json:"ramp,omitempty"`
	// MaxRate is the highest deliveries/s of a run (steady included) with
	// publish → client p99 within goalRampP99MS.
	MaxRate float64 `json:"max_deliveries_per_s_p99_250ms"`
	// RampError is why the ramp stopped early, if it did.
	RampError string `json:"ramp_error,omitempty"`
	// BesidePipeline is the steady shape run once more later, while our
	// pipeline carries the same update rate beside it (the publisher,
	// NATS, ingest, Postgres and Redis busy as in our steady phase, our
	// node up with its streams closed): the anchor on the machine our node
	// had. BesideCores is what those processes used meanwhile.
	BesidePipeline *AnchorRun         `json:"beside_pipeline,omitempty"`
	BesideCores    map[string]float64 `json:"beside_pipeline_cores,omitempty"`
	BesideBusyPct  float64            `json:"beside_pipeline_machine_busy_pct,omitempty"`
	BesideError    string             `json:"beside_pipeline_error,omitempty"`
	// bin holds the anchor's binaries until the benchmark ends (cleanup).
	bin string
}

// cleanup removes the anchor's binaries.
func (a *AnchorResult) cleanup() {
	if a.bin != "" {
		os.RemoveAll(a.bin) //nolint:errcheck // a temp dir left behind is harmless
		a.bin = ""
	}
}

// anchorLoadResult is what the load tool's -json holds that we use.
type anchorLoadResult struct {
	ConnsFailed        int     `json:"conns_failed"`
	ConnsDropped       int     `json:"conns_dropped"`
	PubRateAchieved    float64 `json:"pub_rate_achieved"`
	ExpectedInWindow   int64   `json:"expected_deliveries_in_window"`
	DeliveriesInWindow uint64  `json:"deliveries_in_window"`
	DeliveriesPerSec   float64 `json:"deliveries_per_sec"`
	Lost               int64   `json:"lost"`
	Duplicates         int64   `json:"duplicates"`
	VersionGaps        int64   `json:"version_gaps"`
	OutOfOrder         int64   `json:"out_of_order"`
	LatencyUS          struct {
		P50, P99, Max uint64
	} `json:"latency_us"`
	FromDueUS struct {
		P99 uint64
	} `json:"latency_from_due_us"`
	PerConnKB      float64 `json:"per_conn_kb"`
	WindowSeconds  float64 `json:"window_seconds"`
	ServerCPUSec   float64 `json:"server_cpu_sec"`
	ServerUSPerDel float64 `json:"server_cpu_us_per_delivery"`
	LoadCPUSec     float64 `json:"load_cpu_sec"`
}

// run converts the load tool's figures.
func (l anchorLoadResult) run(name string, subs int, rate float64, file string) AnchorRun {
	r := AnchorRun{Name: name, SubsPerConn: subs, Rate: rate, PubRate: measure.Round2(l.PubRateAchieved), Seconds: measure.Round2(l.WindowSeconds),
		DeliveriesPerS: measure.Round2(l.DeliveriesPerSec), Expected: l.ExpectedInWindow, Delivered: l.DeliveriesInWindow,
		P50MS: usMS(l.LatencyUS.P50), P99MS: usMS(l.LatencyUS.P99), MaxMS: usMS(l.LatencyUS.Max), FromDueP99MS: usMS(l.FromDueUS.P99),
		CPUPerDelivUS: measure.Round2(l.ServerUSPerDel), PerConnKiB: measure.Round2(l.PerConnKB),
		Lost: l.Lost, Gaps: l.VersionGaps, OutOfOrder: l.OutOfOrder, Duplicates: l.Duplicates,
		ConnsFailed: l.ConnsFailed, ConnsDropped: l.ConnsDropped, Result: file}
	if l.WindowSeconds > 0 {
		r.ServerCores, r.LoadCores = measure.Round2(l.ServerCPUSec/l.WindowSeconds), measure.Round2(l.LoadCPUSec/l.WindowSeconds)
	}
	return r
}

// ExpectedPerS is the deliveries a second the window's publications make.
func (r AnchorRun) ExpectedPerS() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return measure.Round2(float64(r.Expected) / r.Seconds)
}

func usMS(us uint64) float64 { return measure.Round2(float64(us) / 1000) }

// findRepoRoot is the directory holding this module's go.mod, searched
// upwards from dir.
func findRepoRoot(dir string) (string, bool) {
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/marketdata/marketdata\n")) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// anchorDir is where the anchor should be: flag when set, else
// ../shared/anchors/streams from the repository's root (found from the
// working directory, else from the binary under test).
func anchorDir(flag, bin string) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	starts = append(starts, filepath.Dir(bin))
	for _, s := range starts {
		if root, ok := findRepoRoot(s); ok {
			return filepath.Clean(filepath.Join(root, anchorRel)), nil
		}
	}
	return "", fmt.Errorf("the repository's root (go.mod of github.com/marketdata/marketdata) is not above %s", strings.Join(starts, " or "))
}

// inCI says whether this is a CI run, where the anchor must be present.
func inCI() bool { return os.Getenv("CI") != "" }

// runAnchor builds the anchor and its load tool, runs the steady shape and
// the ramp of p against fresh anchors, and returns their figures. An anchor
// that is missing or does not build is an error in CI; elsewhere it is said
// (NotRun, printed in capitals) and the benchmark goes on.
func runAnchor(ctx context.Context, o *world.Options, p StreamParams, flag string, log *slog.Logger) (AnchorResult, error) {
	var res AnchorResult
	notRun := func(err error) (AnchorResult, error) {
		if inCI() || ctx.Err() != nil {
			return res, fmt.Errorf("anchor: %w", err)
		}
		res.NotRun = err.Error()
		log.Warn("ANCHOR NOT RUN", "reason", res.NotRun)
		return res, nil
	}
	if flag == "none" {
		res.NotRun = "skipped (-stream.anchor none)"
		return res, nil
	}
	dir, err := anchorDir(flag, o.Bin)
	if err != nil {
		return notRun(err)
	}
	res.Dir = dir
	if st, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil || st.IsDir() {
		return notRun(fmt.Errorf("no anchor at %s: the streams anchor must sit at %s beside the repository (in CI it is cloned there)", dir, anchorRel))
	}
	bin, err := os.MkdirTemp("", "mdbench-anchor-")
	if err != nil {
		return notRun(err)
	}
	res.bin = bin // kept for the run beside the pipeline; the caller cleans up
	notRunBuilt := notRun
	notRun = func(err error) (AnchorResult, error) {
		res.cleanup()
		return notRunBuilt(err)
	}
	t := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./cmd/anchor", "./cmd/load")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return notRun(fmt.Errorf("build in %s: %w: %s", dir, err, bytes.TrimSpace(out)))
	}
	res.BuildSeconds = measure.Round2(time.Since(t).Seconds())
	log.Info("anchor built", "dir", dir, "seconds", res.BuildSeconds)

	steady, err := anchorLoad(ctx, o, bin, "steady", p.Subs, p, p.Warmup, p.Steady, log)
	if err != nil {
		return notRun(err)
	}
	res.Steady = &steady
	if steady.P99MS <= goalRampP99MS {
		res.MaxRate = steady.DeliveriesPerS
	}
	for _, subs := range p.Steps {
		r, err := anchorLoad(ctx, o, bin, fmt.Sprintf("ramp-%d", subs), subs, p, p.StepWarmup, p.Step, log)
		if err != nil {
			if ctx.Err() != nil {
				return res, err
			}
			res.RampError = err.Error()
			break
		}
		res.Ramp = append(res.Ramp, r)
		if r.P99MS > goalRampP99MS {
			break
		}
		res.MaxRate = max(res.MaxRate, r.DeliveriesPerS)
	}
	return res, nil
}

// anchorLoad starts a fresh anchor, runs the load tool against it in the
// shape of p with subs markets a connection, and stops the anchor.
func anchorLoad(ctx context.Context, o *world.Options, bin, name string, subs int, p StreamParams, warmup, d time.Duration, log *slog.Logger) (AnchorRun, error) {
	addr, err := world.FreePort()
	if err != nil {
		return AnchorRun{}, err
	}
	logPath := filepath.Join(o.Out, "stream-anchor-"+name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return AnchorRun{}, err
	}
	defer lf.Close() //nolint:errcheck // the processes wrote through their own descriptors
	srv := exec.Command(filepath.Join(bin, "anchor"), "-addr", addr)
	srv.Stdout, srv.Stderr = lf, lf
	if err := srv.Start(); err != nil {
		return AnchorRun{}, fmt.Errorf("start anchor: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = srv.Wait() // stopped by us below: its exit status says nothing
		close(exited)
	}()
	defer func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = srv.Process.Kill()
			<-exited
		}
	}()
	if err := waitHTTP(ctx, "http://"+addr+"/publish", exited, 10*time.Second); err != nil {
		return AnchorRun{}, fmt.Errorf("anchor on %s: %w (see %s)", addr, err, logPath)
	}
	jsonPath := filepath.Join(o.Out, "stream-anchor-"+name+".json")
	lctx, cancel := context.WithTimeout(ctx, warmup+d+anchorDrain+anchorSettle+anchorRunSlack)
	defer cancel()
	load := exec.CommandContext(lctx, filepath.Join(bin, "load"),
		"-url", "ws://"+addr+"/connection/websocket", "-publish-url", "http://"+addr+"/publish",
		"-server-pid", strconv.Itoa(srv.Process.Pid),
		"-conns", strconv.Itoa(p.Conns), "-subs", strconv.Itoa(subs), "-hot", strconv.Itoa(p.Hot),
		"-rate", strconv.FormatFloat(p.Rate, 'f', -1, 64),
		"-duration", d.String(), "-warmup", warmup.String(), "-drain", anchorDrain.String(), "-settle", anchorSettle.String(),
		"-json", jsonPath, "-label", "mdbench "+name)
	load.Stdout, load.Stderr = lf, lf
	log.Info("anchor load", "run", name, "conns", p.Conns, "subs", subs, "hot", p.Hot, "rate", p.Rate, "duration", d, "log", logPath)
	if err := load.Run(); err != nil {
		return AnchorRun{}, fmt.Errorf("anchor load %s: %w (see %s)", name, err, logPath)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return AnchorRun{}, fmt.Errorf("anchor load %s: %w", name, err)
	}
	var l anchorLoadResult
	if err := json.Unmarshal(b, &l); err != nil {
		return AnchorRun{}, fmt.Errorf("anchor load %s: %s: %w", name, jsonPath, err)
	}
	r := l.run(name, subs, p.Rate, jsonPath)
	log.Info("anchor run", "run", name, "deliveries_per_s", r.DeliveriesPerS, "p50_ms", r.P50MS, "p99_ms", r.P99MS,
		"cpu_us_per_delivery", r.CPUPerDelivUS, "per_conn_kib", r.PerConnKiB, "lost", r.Lost)
	return r, nil
}

// waitHTTP waits until url answers anything over HTTP.
func waitHTTP(ctx context.Context, url string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering within %s: %w", timeout, err)
		}
		select {
		case <-exited:
			return errors.New("exited early")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Command mdbench benchmarks the real marketdata binary against the local
// services (Postgres, Redis, NATS) over loopback.
//
//	go run ./cmd/mdbench -bin bin/marketdata              # every benchmark
//	go run ./cmd/mdbench -bin bin/marketdata -only ingest # some of them
//	go run ./cmd/mdbench -bin bin/marketdata ingest       # the same
//
// Each benchmark runs in a sandbox of its own (a fresh database, Redis prefix
// and stream names, all removed at the end), starts the binary as a child
// process, prints a table on stdout and writes <out>/<name>.json. It exits 0
// when every benchmark ran, whether or not its speed goals were met, and
// non-zero when one could not run (setup error, timeout, lost updates) or
// found a broken promise (poll: a version regression or a failed poll;
// stream: a lost update, a version going backwards, a seq gap; its JSON is
// written all the same).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/marketdata/marketdata/bench/baseline"
	"github.com/marketdata/marketdata/bench/idle"
	"github.com/marketdata/marketdata/bench/ingest"
	"github.com/marketdata/marketdata/bench/key"
	"github.com/marketdata/marketdata/bench/poll"
	"github.com/marketdata/marketdata/bench/reads"
	"github.com/marketdata/marketdata/bench/stream"
	"github.com/marketdata/marketdata/bench/world"
)

// Bench is one named benchmark. Run prints its table and returns what goes
// into <out>/<name>.json; an error means the benchmark itself failed.
type Bench struct {
	Name    string
	Help    string
	Timeout time.Duration
	Run     func(ctx context.Context, o *world.Options, log *slog.Logger) (any, error)
}

// benches are all benchmarks, in the order a full run takes them. HTTP
// benchmarks join this list.
var benches = []Bench{
	{Name: "ingest", Help: "NATS → ingest → Postgres → Redis: end-to-end rate vs raw upserts, freshness at 5,000/s, Postgres CPU per applied update (ingest's own backends)",
		Timeout: 3 * time.Minute, Run: ingest.Run},
	{Name: "key", Help: "GET /public/v1/key through the full middleware vs a bare Fiber handler (64 connections)",
		Timeout: 2 * time.Minute, Run: key.Run},
	{Name: "reads", Help: "static reads: snapshot, event read, /events page, search at 50,000 events, and a market's 500 1h candles (its history applied by ingest from NATS first), one fixed URL each on an unchanging world, through the full middleware vs bare Fiber (64 connections)",
		Timeout: 10 * time.Minute, Run: reads.Run},
	{Name: "idle", Help: "snapshot with and without 10,000 idle keep-alive connections open, the node at MD_MAX_CONNS; its RSS with them",
		Timeout: 5 * time.Minute, Run: idle.Run},
	{Name: "poll", Help: "1,000 pollers' own snapshot watchlists (Zipf) with If-None-Match over two API nodes while 5,000 prices/s flow through NATS: rate vs bare, p99, 304s, answer staleness and poll cadence, version regressions and failed polls per round, reads by layer (Postgres reads by the nodes), Postgres CPU of the run's own backends",
		Timeout: 6 * time.Minute, Run: poll.Run},
	{Name: "stream", Help: "one API node, 5,000 WebSocket streams × 20 of 2,000 hot markets while 1,000 prices/s flow through NATS: fan-out and end-to-end latency, CPU per delivery, memory per idle connection, lost updates, a subscriber ramp, snapshot reads with and without the streams, reads by layer; the streams anchor (../shared/anchors/streams) run in the same shape in the same run, side by side",
		Timeout: 15 * time.Minute, Run: stream.Run},
}

func main() {
	os.Exit(run())
}

func run() int {
	var (
		o       world.Options
		only    string
		timeout time.Duration
	)
	fs := flag.NewFlagSet("mdbench", flag.ContinueOnError)
	fs.StringVar(&o.Bin, "bin", "bin/marketdata", "the marketdata binary to benchmark")
	fs.StringVar(&only, "only", "", "comma-separated benchmarks to run (default all): "+strings.Join(names(), ", "))
	fs.StringVar(&o.Out, "out", "bench-results", "directory for <bench>.json and child logs")
	fs.StringVar(&o.PostgresURL, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "Postgres maintenance database URL")
	fs.StringVar(&o.RedisURL, "redis", "redis://127.0.0.1:6379/0", "Redis URL")
	fs.StringVar(&o.NATSURL, "nats", "nats://127.0.0.1:4222", "NATS URL")
	fs.BoolVar(&o.Usage, "usage", true, "count usage in the API nodes; -usage=false starts them with --usage=false (run a bench both ways to see what counting costs)")
	fs.BoolVar(&o.Profile, "profile", false, "reads: take a CPU profile of the API on every route, not only on those that missed a goal; stream: of the node in the steady phase; poll: of one API node and of ingest in the last round")
	fs.DurationVar(&timeout, "timeout", 0, "how long each benchmark may take in all (default: its own, shown after \"at most\" in the list above; raise it for big worlds, whose seed alone can take minutes)")
	fs.DurationVar(&world.DrainTimeout, "drain", world.DrainTimeout, "how long a phase waits for ingest to drain its stream (raise it for big worlds)")
	ingest.Flags(fs, &ingest.Params)
	poll.Flags(fs, &poll.Params)
	stream.Flags(fs, &stream.Params)
	var bareAddr, bareBody, bareBodies, selfProfile string
	fs.StringVar(&selfProfile, "self-profile", "", "write mdbench's own CPU profile (the load generator's) over the whole run to this file")
	fs.StringVar(&bareAddr, "serve-bare", "", "internal: serve the bare baseline on this address")
	fs.StringVar(&bareBody, "bare-body", "", "internal: the body the bare baseline returns")
	fs.StringVar(&bareBodies, "bare-bodies", "", "internal: the bodies the bare baseline returns, by query string (JSON)")
	fs.Usage = func() {
		var u strings.Builder
		u.WriteString("usage: mdbench [flags] [bench...]\n\nbenchmarks:\n")
		for _, b := range benches {
			fmt.Fprintf(&u, "  %-8s %s (at most %s)\n", b.Name, b.Help, b.Timeout)
		}
		u.WriteString("\nflags:\n")
		_, _ = fmt.Fprint(fs.Output(), u.String()) // a closed terminal has no usage to show
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if bareAddr != "" {
		serve := func() error { return baseline.ServeBare(bareAddr, bareBody) }
		if bareBodies != "" {
			serve = func() error { return baseline.ServeBareBodies(bareAddr, bareBodies) }
		}
		if err := serve(); err != nil {
			fmt.Fprintln(os.Stderr, "mdbench: bare:", err)
			return 1
		}
		return 0
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	selected, err := selectBenches(only, fs.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdbench:", err)
		return 2
	}
	if o.Bin, err = filepath.Abs(o.Bin); err != nil {
		fmt.Fprintln(os.Stderr, "mdbench: -bin:", err)
		return 2
	}
	if st, err := os.Stat(o.Bin); err != nil || st.IsDir() {
		fmt.Fprintf(os.Stderr, "mdbench: -bin %s is not a file (run `make build` first)\n", o.Bin)
		return 2
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "mdbench: -out:", err)
		return 2
	}
	o.Machine = machineFacts(o.Bin)
	if selfProfile != "" {
		f, err := os.Create(selfProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mdbench: -self-profile:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "mdbench: -self-profile:", err)
			return 2
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "mdbench: -self-profile:", err)
			}
		}()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed := 0
	for _, b := range selected {
		if timeout > 0 {
			b.Timeout = timeout
		}
		log.Info("bench start", "bench", b.Name, "timeout", b.Timeout)
		bctx, cancel := context.WithTimeout(ctx, b.Timeout)
		res, err := b.Run(bctx, &o, log.With("bench", b.Name))
		cancel()
		if err != nil {
			failed++
			log.Error("bench failed", "bench", b.Name, "err", err)
			fmt.Printf("\n%s: FAILED: %v\n", b.Name, err)
			continue
		}
		path := filepath.Join(o.Out, b.Name+".json")
		if err := writeJSON(path, res); err != nil {
			failed++
			log.Error("bench result not written", "bench", b.Name, "err", err)
			continue
		}
		if f, ok := res.(world.Failer); ok {
			if err := f.Failure(); err != nil {
				failed++
				log.Error("bench found faults", "bench", b.Name, "err", err, "result", path)
				fmt.Printf("%s: FAILED: %v (figures in %s)\n", b.Name, err, path)
				continue
			}
		}
		log.Info("bench done", "bench", b.Name, "result", path)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

func names() []string {
	out := make([]string, len(benches))
	for i, b := range benches {
		out[i] = b.Name
	}
	return out
}

// selectBenches picks the benchmarks named by -only and the arguments, in
// the canonical order; none named means all.
func selectBenches(only string, args []string) ([]Bench, error) {
	var want []string
	for n := range strings.SplitSeq(only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want = append(want, n)
		}
	}
	want = append(want, args...)
	if len(want) == 0 {
		return benches, nil
	}
	for _, n := range want {
		if !slices.Contains(names(), n) {
			return nil, fmt.Errorf("unknown benchmark %q (have %s)", n, strings.Join(names(), ", "))
		}
	}
	var out []Bench
	for _, b := range benches {
		if slices.Contains(want, b.Name) {
			out = append(out, b)
		}
	}
	return out, nil
}

func machineFacts(bin string) world.Machine {
	m := world.Machine{
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Date: time.Now().UTC().Truncate(time.Second),
	}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command(bin, "--version").Output(); err == nil {
		m.BinVersion = strings.TrimSpace(string(b))
	}
	return m
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

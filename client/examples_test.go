package client_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/servicetest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// buildExample builds client/examples/<name> into dir.
func buildExample(t *testing.T, dir, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, "./examples/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./examples/%s: %v\n%s", name, err, out)
	}
	return bin
}

// startExample starts bin with args and env; its output (stdout and
// stderr) is read from the returned reader, until the program ends.
func startExample(ctx context.Context, t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// TestExamplePrograms runs the example programs against the real service
// and checks what they print (run with -v to read it).
func TestExamplePrograms(t *testing.T) {
	testenv.Integration(t, "the service and the go command")
	dir := t.TempDir()
	venueMap := buildExample(t, dir, "venue-map")
	poll := buildExample(t, dir, "poll-watchlist")
	s := startService(t, nil)
	w := s.Seed("x", 6, 2)
	key := s.NewKey("markets:read")
	env := append(os.Environ(), "MD_KEY="+key.Secret)
	runProg := func(bin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"-base-url", s.URL()}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, out)
		}
		t.Logf("$ %s %s\n%s", filepath.Base(bin), strings.Join(args, " "), out)
		return string(out)
	}

	out := runProg(venueMap, "-print", "5")
	if !strings.HasPrefix(out, "6 events, 17 venue event ids: venue_a 6 venue_b 6 venue_c 3 venue_d 2\n") ||
		!strings.Contains(out, "venue_a  A-x-e001                     → x-e001") {
		t.Fatalf("venue-map: unexpected output:\n%s", out)
	}
	if out := runProg(venueMap, "-venue", "venue_c", "-id", "Cx-e004"); out != "venue_c Cx-e004 → x-e004\n" {
		t.Fatalf("venue-map lookup: got %q", out)
	}
	if out := runProg(venueMap, "-print", "3", "-markets"); !strings.Contains(out, "24 venue market ids in 6 event reads\n") {
		t.Fatalf("venue-map -markets: unexpected output:\n%s", out)
	}

	// poll-watchlist: the first round prints the 4 markets of the first 2
	// events; a price published then is printed once more.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, stdout := startExample(ctx, t, poll, env, "-base-url", s.URL(), "-events", "2", "-interval", "1s", "-for", "8s")
	var lines []string
	sc := bufio.NewScanner(stdout)
	changed := &servicetest.Price{MarketID: w.Markets[1].ID, Quotes: map[string]servicetest.Quote{"venue_b": {Bid: 0.71, Ask: 0.74, Last: 0.72}}}
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) == 5 { // "watching 4 markets …" and the first round
			s.PublishPrice(changed)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("poll-watchlist: %v\n%s", err, strings.Join(lines, "\n"))
	}
	text := strings.Join(lines, "\n")
	t.Logf("$ poll-watchlist -events 2 -interval 1s -for 8s\n%s", text)
	if len(lines) != 7 || lines[0] != "watching 4 markets every 1s" ||
		!strings.Contains(lines[5], "x-e001-m2                bid 0.71 ask 0.74  v2") ||
		!strings.HasPrefix(lines[6], "5 prices handed over in 2 rounds with changes; ") {
		t.Fatalf("poll-watchlist: unexpected output:\n%s", text)
	}
}

package measure

import (
	"os"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	for _, c := range []struct {
		name, stat string
		comm       string
		ticks      int64
		bad        bool
	}{
		{"postgres backend",
			"2212 (postgres) S 2211 2212 2212 0 -1 4194368 626 0 1 0 22 35 0 0 20 0 1 0 4689 222945280 7888",
			"postgres", 57, false},
		{"command with spaces and parentheses",
			"77 (a (b) c) R 1 77 77 0 -1 0 0 0 0 0 1000 250 0 0 20 0 1 0 1 1 1",
			"a (b) c", 1250, false},
		{"truncated", "77 (x) R 1 2 3", "", 0, true},
		{"no command", "77 x R", "", 0, true},
		{"not a number", "77 (x) R 1 77 77 0 -1 0 0 0 0 0 ten 250 0", "", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			comm, ticks, err := ParseStatTicks([]byte(c.stat))
			if c.bad {
				if err == nil {
					t.Fatalf("ParseStatTicks(%q) = %q, %d, want an error", c.stat, comm, ticks)
				}
				return
			}
			if err != nil || comm != c.comm || ticks != c.ticks {
				t.Errorf("ParseStatTicks = %q, %d, %v; want %q, %d", comm, ticks, err, c.comm, c.ticks)
			}
		})
	}
}

// TestGroupOf: the children count under their names, this process as
// mdbench, the services by command name, everything else as other.
func TestGroupOf(t *testing.T) {
	children := map[int]string{4242: "api-a", 4343: "ingest"}
	for _, c := range []struct {
		pid  int
		comm string
		want string
	}{
		{4242, "marketdata", "api-a"},
		{4343, "marketdata", "ingest"},
		{os.Getpid(), selfComm, "mdbench"},
		{1, selfComm, "bare"},
		{10, "postgres", "postgres"},
		{11, "redis-server", "redis-server"},
		{12, "nats-server", "nats-server"},
		{13, "cc1", "other"},
	} {
		if got := groupOf(c.pid, c.comm, children); got != c.want {
			t.Errorf("groupOf(%d, %q) = %q, want %q", c.pid, c.comm, got, c.want)
		}
	}
}

// TestUsageSince: cores per group are the group's CPU seconds over the wall
// time between the samples; a group that used nothing (or whose processes
// exited) is left out; machine busy is the busy share of all cores' time.
func TestUsageSince(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)
	before := CPUSample{at: t0, Seconds: map[string]float64{"api-a": 10, "postgres": 5, "other": 40}, busy: 100, total: 400}
	after := CPUSample{at: t0.Add(2 * time.Second), Seconds: map[string]float64{"api-a": 13, "postgres": 5.5, "other": 39, "ingest": 1},
		busy: 104, total: 408}
	u := after.UsageSince(before)
	want := map[string]float64{"api-a": 1.5, "postgres": 0.25, "ingest": 0.5}
	if len(u.Cores) != len(want) {
		t.Errorf("cores %v, want %v", u.Cores, want)
	}
	for g, w := range want {
		if u.Cores[g] != w {
			t.Errorf("cores[%s] = %v, want %v", g, u.Cores[g], w)
		}
	}
	if u.MachineBusy != 50 {
		t.Errorf("machine busy %v %%, want 50", u.MachineBusy)
	}
	if got := before.UsageSince(before); len(got.Cores) != 0 || got.MachineBusy != 0 {
		t.Errorf("usage over no time = %+v, want none", got)
	}
}

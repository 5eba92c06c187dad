package measure

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is USER_HZ, the unit of /proc CPU times: 100 on every Linux
// architecture Go supports.
const ClockTicks = 100

// CPUSample is the CPU time used so far, per process group, read from /proc.
type CPUSample struct {
	at      time.Time
	Seconds map[string]float64 // by group
	busy    float64            // machine-wide non-idle seconds
	total   float64            // machine-wide seconds over all cores
}

// groupOf names the group a process counts in: the children under test (by
// the names given) and this process by pid, the baseline servers (our own binary)
// and the services by command name. Postgres and Redis are shared with
// whatever else runs on the machine, so their figures include other users.
func groupOf(pid int, comm string, children map[int]string) string {
	if name, ok := children[pid]; ok {
		return name
	}
	switch {
	case pid == os.Getpid():
		return "mdbench"
	case comm == selfComm:
		return "bare"
	case comm == "postgres", comm == "redis-server", comm == "nats-server":
		return comm
	default:
		return "other"
	}
}

// selfComm is this binary's command name as /proc shows it (at most 15
// bytes): the baseline servers are this binary too.
var selfComm = func() string {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}()

// SampleCPU reads every process's CPU time and the machine's, with the
// ingest child as "ingest".
func SampleCPU(ingestPid int) CPUSample { return SampleCPUOf(ingestPid, "ingest") }

// SampleCPUOf reads every process's CPU time and the machine's, with the
// child pid as group name. On a system without /proc it returns an empty
// sample, and usage comes out empty.
func SampleCPUOf(pid int, name string) CPUSample { return SampleCPUNamed(map[int]string{pid: name}) }

// SampleCPUNamed is SampleCPUOf with several children, each its own group.
func SampleCPUNamed(children map[int]string) CPUSample {
	s := CPUSample{at: time.Now(), Seconds: map[string]float64{}}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i := 1; i < len(f); i++ {
			v, _ := strconv.ParseFloat(f[i], 64)
			if i >= 9 { // guest time is already counted in user time
				break
			}
			s.total += v / ClockTicks
			if i != 4 && i != 5 { // idle, iowait
				s.busy += v / ClockTicks
			}
		}
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		comm, ticks, err := ParseStatTicks(b)
		if err != nil {
			continue
		}
		s.Seconds[groupOf(p, comm, children)] += float64(ticks) / ClockTicks
	}
	return s
}

// CPUUsage is the CPU used between two samples: cores per group (1.0 = one
// core busy the whole time) and the machine's busy share in percent.
type CPUUsage struct {
	Cores       map[string]float64 `json:"cores"`
	MachineBusy float64            `json:"machine_busy_pct"`
}

// UsageSince is the usage from before to s. Processes that exited between
// the two samples (short-lived Postgres backends of other users) are missed.
func (s CPUSample) UsageSince(before CPUSample) CPUUsage {
	u := CPUUsage{Cores: map[string]float64{}}
	wall := s.at.Sub(before.at).Seconds()
	if wall <= 0 {
		return u
	}
	for g, v := range s.Seconds {
		if d := v - before.Seconds[g]; d > 0 {
			u.Cores[g] = Round2(d / wall)
		}
	}
	if dt := s.total - before.total; dt > 0 {
		u.MachineBusy = Round2(100 * (s.busy - before.busy) / dt)
	}
	return u
}

func Round2(v float64) float64 { return math.Round(v*100) / 100 }

// ParseStatTicks reads a /proc/<pid>/stat line: the command name and
// utime + stime in clock ticks. The command is in parentheses and may hold
// spaces and parentheses itself, so the fields are counted after the last ')'.
func ParseStatTicks(b []byte) (comm string, ticks int64, err error) {
	s := string(b)
	lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if lp < 0 || rp < lp {
		return "", 0, errors.New("stat: no command name")
	}
	f := strings.Fields(s[rp+1:])
	if len(f) < 13 {
		return "", 0, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	// Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the comm.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return "", 0, fmt.Errorf("stat: utime/stime: %w", err)
	}
	return s[lp+1 : rp], ut + st, nil
}

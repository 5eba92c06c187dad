package measure

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcMem is a process's memory from /proc/<pid>/status, in MB.
type ProcMem struct {
	RSSMB float64 `json:"vm_rss_mb"`
	HWMMB float64 `json:"vm_hwm_mb"`
}

// ReadProcMem reads VmRSS and VmHWM (the peak RSS) of pid.
func ReadProcMem(pid int) (ProcMem, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcMem{}, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	defer f.Close() //nolint:errcheck // read only: closing loses nothing
	var m ProcMem
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return ProcMem{}, fmt.Errorf("pid %d: %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			m.RSSMB = Round2(kb / 1024)
		} else {
			m.HWMMB = Round2(kb / 1024)
		}
	}
	return m, sc.Err()
}

// FetchTo writes the body of a GET of u to file.
func FetchTo(ctx context.Context, u, file string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close() //nolint:errcheck // the copy error is the one to report
		return err
	}
	return f.Close()
}

// LogWarnings counts the WARN and ERROR lines of a JSON log by level and
// message; lines that are not JSON are left out.
func LogWarnings(path string) map[string]int {
	out := map[string]int{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close() //nolint:errcheck // read only: closing loses nothing
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var l struct{ Level, Msg string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && (l.Level == "WARN" || l.Level == "ERROR") {
			out[l.Level+" "+l.Msg]++
		}
	}
	return out
}

// AddLogWarnings counts the warnings of every child log (name → path) into
// warnings, by child name.
func AddLogWarnings(warnings map[string]map[string]int, logs map[string]string) {
	for name, path := range logs {
		warnings[name] = LogWarnings(path)
	}
}

package measure

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

var (
	KeyMarketID = []byte(`"market_id":"`)
	KeyVersion  = []byte(`"version":`)
)

// errLayout is an answer whose items scanVersions cannot read.
var errLayout = errors.New("snapshot answer: item layout not understood")

// ScanVersions reads the version of each item of a snapshot answer into
// out, by position in ids (0 for an id with no item), and returns how many
// items it read. The load generator shares the machine with the servers, so
// it does not decode 20 KB of JSON per answer: it relies on the contract's
// item order (request order) and on each price item holding "market_id"
// before "version" (cache/render.go's layout), and finds both with
// bytes.Index. checkScan verifies that on real answers before a run.
func ScanVersions(body []byte, ids []string, out []int64) (int, error) {
	clear(out)
	found, j := 0, 0
	rest := body
	i := bytes.Index(rest, KeyMarketID)
	for i >= 0 {
		rest = rest[i+len(KeyMarketID):]
		q := bytes.IndexByte(rest, '"')
		if q < 0 {
			return found, errLayout
		}
		id := rest[:q]
		for j < len(ids) && ids[j] != string(id) {
			j++ // ids before it are missing: the items keep request order
		}
		if j == len(ids) {
			return found, fmt.Errorf("%w: item %q out of request order", errLayout, id)
		}
		rest = rest[q:]
		// The item ends where the next one begins; its version is before.
		i = bytes.Index(rest, KeyMarketID)
		item := rest
		if i >= 0 {
			item = rest[:i]
		}
		k := bytes.Index(item, KeyVersion)
		if k < 0 {
			return found, fmt.Errorf("%w: no version after %q", errLayout, id)
		}
		v, ok := ParseVersion(item[k+len(KeyVersion):])
		if !ok {
			return found, fmt.Errorf("%w: version of %q", errLayout, id)
		}
		out[j] = v
		found++
		j++
	}
	return found, nil
}

// ParseVersion reads the positive integer b begins with.
func ParseVersion(b []byte) (int64, bool) {
	var v int64
	n := 0
	for ; n < len(b) && b[n] >= '0' && b[n] <= '9' && n < 18; n++ {
		v = v*10 + int64(b[n]-'0')
	}
	return v, n > 0 && v > 0
}

// CheckScan decodes body in full and compares it with scanVersions: a
// change of the item layout stops the benchmark before it measures wrong.
func CheckScan(body []byte, ids []string) error {
	var doc struct {
		Data []struct {
			MarketID string `json:"market_id"`
			Version  int64  `json:"version"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("snapshot answer is not JSON: %w", err)
	}
	got := make([]int64, len(ids))
	n, err := ScanVersions(body, ids, got)
	if err != nil {
		return err
	}
	if n != len(doc.Data) {
		return fmt.Errorf("%w: scanned %d items, the answer has %d", errLayout, n, len(doc.Data))
	}
	want := make(map[string]int64, len(doc.Data))
	for _, d := range doc.Data {
		want[d.MarketID] = d.Version
	}
	for j, id := range ids {
		if got[j] != want[id] {
			return fmt.Errorf("%w: %s scanned as version %d, decoded %d", errLayout, id, got[j], want[id])
		}
	}
	return nil
}

// HistBuckets bounds durHist: 64 buckets a doubling from 128 µs reach past
// an hour.
const HistBuckets = 64 * 28

// DurHist is a log-linear histogram of durations in microseconds: exact
// below 128 µs, then 64 buckets per doubling (at most 1.6 % wide). Millions
// of staleness samples a round fit in 14 KB, one per connection, merged at
// the end.
type DurHist struct {
	Counts [HistBuckets]int64
	N      int64
	Max    int64
}

func HistIndex(us int64) int {
	if us < 128 {
		return int(max(us, 0))
	}
	e := bits.Len64(uint64(us)) - 7 // us>>e is in [64, 128)
	return min(64*(e+1)+int(us>>e)-64, HistBuckets-1)
}

// histUpper is the largest value bucket i holds.
func histUpper(i int) int64 {
	if i < 128 {
		return int64(i)
	}
	e := i/64 - 1
	return (int64(i%64+64)+1)<<e - 1
}

func (h *DurHist) Add(us int64) {
	h.Counts[HistIndex(us)]++
	h.N++
	h.Max = max(h.Max, us)
}

func (h *DurHist) Merge(o *DurHist) {
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.N += o.N
	h.Max = max(h.Max, o.Max)
}

// QuantileMS is the nearest-rank q-quantile in milliseconds (the upper
// bound of its bucket, so never below the true value), with beyond more
// samples ranked above every bucket. It returns ok false when the rank falls
// among those.
func (h *DurHist) QuantileMS(q float64, beyond int64) (ms float64, ok bool) {
	total := h.N + beyond
	if total == 0 {
		return 0, true
	}
	rank := int64(math.Ceil(q * float64(total)))
	rank = max(rank, 1)
	var c int64
	for i, n := range h.Counts {
		if c += n; c >= rank {
			return Round2(float64(min(histUpper(i), h.Max)) / 1000), true
		}
	}
	return 0, false
}

// MaxRegressionsKept is how many regressions a run keeps in full (the count
// is always exact).
const MaxRegressionsKept = 10

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

var (
	keyMarketID = []byte(`"market_id":"`)
	keyVersion  = []byte(`"version":`)
)

// errLayout is an answer whose items scanVersions cannot read.
var errLayout = errors.New("snapshot answer: item layout not understood")

// scanVersions reads the version of each item of a snapshot answer into
// out, by position in ids (0 for an id with no item), and returns how many
// items it read. The load generator shares the machine with the servers, so
// it does not decode 20 KB of JSON per answer: it relies on the contract's
// item order (request order) and on each price item holding "market_id"
// before "version" (cache/render.go's layout), and finds both with
// bytes.Index. checkScan verifies that on real answers before a run.
func scanVersions(body []byte, ids []string, out []int64) (int, error) {
	clear(out)
	found, j := 0, 0
	rest := body
	i := bytes.Index(rest, keyMarketID)
	for i >= 0 {
		rest = rest[i+len(keyMarketID):]
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
		i = bytes.Index(rest, keyMarketID)
		item := rest
		if i >= 0 {
			item = rest[:i]
		}
		k := bytes.Index(item, keyVersion)
		if k < 0 {
			return found, fmt.Errorf("%w: no version after %q", errLayout, id)
		}
		v, ok := parseVersion(item[k+len(keyVersion):])
		if !ok {
			return found, fmt.Errorf("%w: version of %q", errLayout, id)
		}
		out[j] = v
		found++
		j++
	}
	return found, nil
}

// parseVersion reads the positive integer b begins with.
func parseVersion(b []byte) (int64, bool) {
	var v int64
	n := 0
	for ; n < len(b) && b[n] >= '0' && b[n] <= '9' && n < 18; n++ {
		v = v*10 + int64(b[n]-'0')
	}
	return v, n > 0 && v > 0
}

// checkScan decodes body in full and compares it with scanVersions: a
// change of the item layout stops the benchmark before it measures wrong.
func checkScan(body []byte, ids []string) error {
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
	n, err := scanVersions(body, ids, got)
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

// histBuckets bounds durHist: 64 buckets a doubling from 128 µs reach past
// an hour.
const histBuckets = 64 * 28

// durHist is a log-linear histogram of durations in microseconds: exact
// below 128 µs, then 64 buckets per doubling (at most 1.6 % wide). Millions
// of staleness samples a round fit in 14 KB, one per connection, merged at
// the end.
type durHist struct {
	counts [histBuckets]int64
	n      int64
	max    int64
}

func histIndex(us int64) int {
	if us < 128 {
		return int(max(us, 0))
	}
	e := bits.Len64(uint64(us)) - 7 // us>>e is in [64, 128)
	return min(64*(e+1)+int(us>>e)-64, histBuckets-1)
}

// histUpper is the largest value bucket i holds.
func histUpper(i int) int64 {
	if i < 128 {
		return int64(i)
	}
	e := i/64 - 1
	return (int64(i%64+64)+1)<<e - 1
}

func (h *durHist) add(us int64) {
	h.counts[histIndex(us)]++
	h.n++
	h.max = max(h.max, us)
}

func (h *durHist) merge(o *durHist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantileMS is the nearest-rank q-quantile in milliseconds (the upper
// bound of its bucket, so never below the true value), with beyond more
// samples ranked above every bucket. It returns ok false when the rank falls
// among those.
func (h *durHist) quantileMS(q float64, beyond int64) (ms float64, ok bool) {
	total := h.n + beyond
	if total == 0 {
		return 0, true
	}
	rank := int64(math.Ceil(q * float64(total)))
	rank = max(rank, 1)
	var c int64
	for i, n := range h.counts {
		if c += n; c >= rank {
			return round2(float64(min(histUpper(i), h.max)) / 1000), true
		}
	}
	return 0, false
}

// maxRegressionsKept is how many regressions a run keeps in full (the count
// is always exact).
const maxRegressionsKept = 10

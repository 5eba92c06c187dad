// Package measure is what every benchmark measures and reports with:
// Prometheus scrapes and histograms, CPU by process, reads by layer, the
// HTTP load generator, process memory and profiles, versions read from
// rendered bodies, report tables and goal checks.
package measure

import (
	"bufio"
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Scrape is one /metrics page: sample value by series, the series written as
// in the exposition format ("name" or `name{label="v",...}`).
type Scrape map[string]float64

// ParseMetrics reads the Prometheus text format as promhttp writes it (no
// timestamps). Comments and unparsable lines are skipped.
func ParseMetrics(body []byte) Scrape {
	s := Scrape{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		s[line[:i]] = v
	}
	return s
}

// Sub returns s − before for every series of s: the change over a phase.
// Counters and histograms only; gauges come out meaningless.
func (s Scrape) Sub(before Scrape) Scrape {
	out := make(Scrape, len(s))
	for k, v := range s {
		out[k] = v - before[k]
	}
	return out
}

// Bucket is one cumulative histogram bucket.
type Bucket struct {
	LE    float64
	Count float64
}

// Histogram returns the buckets of an unlabelled histogram, by bound, with
// its sample count and sum.
func (s Scrape) Histogram(name string) (buckets []Bucket, count, sum float64) {
	prefix := name + `_bucket{le="`
	for k, v := range s {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(rest, `"}`), 64)
		if err != nil {
			continue
		}
		buckets = append(buckets, Bucket{LE: le, Count: v})
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].LE < buckets[j].LE })
	return buckets, s[name+"_count"], s[name+"_sum"]
}

// Quantile estimates the q-quantile of a histogram as Prometheus'
// histogram_quantile does: linear within the bucket that holds the rank, and
// the highest finite bound when the rank falls in +Inf. NaN without samples.
func Quantile(q float64, buckets []Bucket) float64 {
	if len(buckets) == 0 {
		return math.NaN()
	}
	total := buckets[len(buckets)-1].Count
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i, b := range buckets {
		if b.Count >= rank {
			if math.IsInf(b.LE, 1) {
				if i == 0 {
					return math.NaN()
				}
				return buckets[i-1].LE
			}
			if b.Count == below {
				return b.LE
			}
			return lower + (b.LE-lower)*(rank-below)/(b.Count-below)
		}
		lower, below = b.LE, b.Count
	}
	return lower
}

// HistSummary is a histogram over one phase, as the report shows it.
type HistSummary struct {
	Count  float64 `json:"count"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
}

// SecondsHistogram summarises a histogram in seconds, in milliseconds.
func (s Scrape) SecondsHistogram(name string) HistSummary {
	b, n, sum := s.Histogram(name)
	h := HistSummary{Count: n, P50MS: 1000 * Quantile(0.5, b), P99MS: 1000 * Quantile(0.99, b)}
	if n > 0 {
		h.MeanMS = 1000 * sum / n
	}
	h.P50MS, h.P99MS, h.MeanMS = Round2(Finite(h.P50MS)), Round2(Finite(h.P99MS)), Round2(h.MeanMS)
	return h
}

// Finite turns NaN into 0: encoding/json refuses NaN.
func Finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

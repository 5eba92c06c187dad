package measure

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// readsMetric counts an API node's data reads by resource and by the layer
// that answered them (memory, redis, store, and whatever layers the node
// adds: the benchmark takes the labels it finds).
const readsMetric = "marketdata_reads_total"

// StoreLayer is the layer label of reads answered by Postgres: in the steady
// state an API node should make none.
const StoreLayer = "store"

// Reads are data reads by resource, then by layer.
type Reads map[string]map[string]float64

// parseLabels reads the labels of a series key as ParseMetrics keeps it
// (`name{a="x",b="y"}`); ok is false for another metric. Label values with
// escaped quotes are not expected in these metrics.
func parseLabels(series, name string) (map[string]string, bool) {
	rest, ok := strings.CutPrefix(series, name+"{")
	if !ok || !strings.HasSuffix(rest, "}") {
		return nil, false
	}
	rest = strings.TrimSuffix(rest, "}")
	labels := map[string]string{}
	for rest != "" {
		k, after, ok := strings.Cut(rest, `="`)
		if !ok {
			return nil, false
		}
		v, after, ok := strings.Cut(after, `"`)
		if !ok {
			return nil, false
		}
		labels[strings.TrimPrefix(k, ",")] = v
		rest = after
	}
	return labels, true
}

// ReadsOf is the node's marketdata_reads_total by resource and layer, every
// label value that appears (zeros included).
func (s Scrape) ReadsOf() Reads {
	r := Reads{}
	for k, v := range s {
		l, ok := parseLabels(k, readsMetric)
		if !ok {
			continue
		}
		res, layer := l["resource"], l["layer"]
		if r[res] == nil {
			r[res] = map[string]float64{}
		}
		r[res][layer] += v
	}
	return r
}

// Add adds o into r.
func (r Reads) Add(o Reads) {
	for res, layers := range o {
		if r[res] == nil {
			r[res] = map[string]float64{}
		}
		for l, v := range layers {
			r[res][l] += v
		}
	}
}

// Layer is the reads of every resource answered by layer.
func (r Reads) Layer(layer string) float64 {
	var n float64
	for _, layers := range r {
		n += layers[layer]
	}
	return n
}

// Layers are the layer labels that appear, in a stable order: the known
// ones first as the read goes down, then any other by name.
func (r Reads) Layers() []string {
	seen := map[string]bool{}
	for _, layers := range r {
		for l := range layers {
			seen[l] = true
		}
	}
	order := []string{"memory", "replica", "redis", StoreLayer}
	var out []string
	for _, l := range order {
		if seen[l] {
			out = append(out, l)
			delete(seen, l)
		}
	}
	return append(out, slices.Sorted(maps.Keys(seen))...)
}

// String shows reads per resource with a nonzero total, each with its
// layers' counts and shares, e.g. "prices: memory 9,000 (90.0%), redis
// 1,000 (10.0%), store 0".
func (r Reads) String() string {
	if len(r) == 0 {
		return "no " + readsMetric + " on the node's /metrics"
	}
	layers := r.Layers()
	var parts []string
	for _, res := range slices.Sorted(maps.Keys(r)) {
		var total float64
		for _, v := range r[res] {
			total += v
		}
		if total == 0 {
			continue
		}
		cells := make([]string, 0, len(layers))
		for _, l := range layers {
			v, ok := r[res][l]
			if !ok {
				continue
			}
			if v == 0 {
				cells = append(cells, l+" 0")
				continue
			}
			cells = append(cells, fmt.Sprintf("%s %.0f (%.1f%%)", l, v, 100*v/total))
		}
		parts = append(parts, res+": "+strings.Join(cells, ", "))
	}
	if len(parts) == 0 {
		return "no reads"
	}
	return strings.Join(parts, "; ")
}

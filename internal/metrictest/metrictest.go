// Package metrictest reads one series of a Prometheus registry in tests:
// the one metric reader of the api, cache and ingest tests, so that each
// matches labels alike. It is imported by tests only.
package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value is the value of the counter, gauge or untyped metric name in g:
// the series whose labels include every name, value pair of labels (none:
// the metric's one series). A series that does not exist reads 0, as an
// unset counter does. Labels that match more than one series fail the
// test: a reader names one series, never the first of several.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("metrictest: %s: labels must be name, value pairs, got %q", name, labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("metrictest: gather: %v", err)
	}
	var value float64
	matched := 0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			have := make(map[string]string, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if !includes(have, labels) {
				continue
			}
			if matched++; matched > 1 {
				t.Fatalf("metrictest: %s%q matches more than one series", name, labels)
			}
			switch {
			case m.GetCounter() != nil:
				value = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				value = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				value = m.GetUntyped().GetValue()
			default:
				t.Fatalf("metrictest: %s is not a counter, gauge or untyped metric", name)
			}
		}
	}
	return value
}

// includes reports whether have holds every name, value pair of pairs.
func includes(have map[string]string, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		if v, ok := have[pairs[i]]; !ok || v != pairs[i+1] {
			return false
		}
	}
	return true
}

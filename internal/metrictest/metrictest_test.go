package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// fatal records a Fatalf instead of ending the test, so that a case can
// assert that Value fails.
type fatal struct {
	testing.TB
	failed bool
}

func (f *fatal) Helper() {}

func (f *fatal) Fatalf(string, ...any) {
	f.failed = true
	panic(f)
}

// value is Value on tb, and whether it failed the test.
func value(tb *fatal, g prometheus.Gatherer, name string, labels ...string) (v float64, failed bool) {
	defer func() {
		if r := recover(); r != nil && r != tb {
			panic(r)
		}
		failed = tb.failed
	}()
	return Value(tb, g, name, labels...), false
}

func TestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	plain := prometheus.NewCounter(prometheus.CounterOpts{Name: "plain_total", Help: "h"})
	reads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reads_total", Help: "h"}, []string{"resource", "layer"})
	level := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "level", Help: "h"}, []string{"stream"})
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seconds", Help: "h"})
	reg.MustRegister(plain, reads, level, hist)
	plain.Add(3)
	reads.WithLabelValues("prices", "memory").Add(5)
	reads.WithLabelValues("prices", "redis").Add(7)
	level.WithLabelValues("s1").Set(2)
	hist.Observe(1)

	cases := []struct {
		name       string
		metric     string
		labels     []string
		want       float64
		wantFailed bool
	}{
		{"unlabelled counter", "plain_total", nil, 3, false},
		{"every label", "reads_total", []string{"resource", "prices", "layer", "redis"}, 7, false},
		{"labels in another order", "reads_total", []string{"layer", "memory", "resource", "prices"}, 5, false},
		{"gauge", "level", []string{"stream", "s1"}, 2, false},
		{"series not there yet", "reads_total", []string{"resource", "events", "layer", "store"}, 0, false},
		{"metric not there", "absent_total", nil, 0, false},
		{"a subset naming two series", "reads_total", []string{"resource", "prices"}, 0, true},
		{"no labels on a labelled metric", "reads_total", nil, 0, true},
		{"odd labels", "reads_total", []string{"resource"}, 0, true},
		{"histogram", "seconds", nil, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, failed := value(&fatal{TB: t}, reg, c.metric, c.labels...)
			if failed != c.wantFailed || (!failed && got != c.want) {
				t.Errorf("Value(%s, %q) = %v (failed %v), want %v (failed %v)", c.metric, c.labels, got, failed, c.want, c.wantFailed)
			}
		})
	}
}

package measure

import (
	"slices"
	"strings"
	"testing"
)

func TestReadsByLayer(t *testing.T) {
	page := func(prices string) Scrape {
		return ParseMetrics([]byte(`# HELP marketdata_reads_total Data reads.
# TYPE marketdata_reads_total counter
marketdata_reads_total{layer="memory",resource="prices"} ` + prices + `
marketdata_reads_total{layer="redis",resource="prices"} 100
marketdata_reads_total{layer="store",resource="prices"} 3
marketdata_reads_total{layer="replica",resource="prices"} 50
marketdata_reads_total{layer="store",resource="event"} 0
marketdata_reads_total{layer="disk",resource="event"} 2
marketdata_reads_totally{layer="store",resource="prices"} 9
marketdata_read_notices_lost_total 4
`))
	}
	r := page("2000").Sub(page("1000")).ReadsOf()
	if got := r["prices"]["memory"]; got != 1000 {
		t.Errorf("prices from memory = %v, want 1000", got)
	}
	if got := r.Layer(StoreLayer); got != 0 {
		t.Errorf("store reads over the phase = %v, want 0", got)
	}
	if got, want := r.Layers(), []string{"memory", "replica", "redis", "store", "disk"}; !slices.Equal(got, want) {
		t.Errorf("layers %v, want %v", got, want)
	}
	all := page("5")
	sum := Reads{}
	sum.Add(all.ReadsOf())
	sum.Add(all.ReadsOf())
	if got := sum.Layer(StoreLayer); got != 6 {
		t.Errorf("store reads of two nodes = %v, want 6", got)
	}
	s := sum.String()
	for _, want := range []string{"prices: memory 10 (3.2%), replica 100 (31.6%), redis 200 (63.3%), store 6 (1.9%)", "event: store 0, disk 4 (100.0%)"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, want it to hold %q", s, want)
		}
	}
	if got := (Reads{}).String(); !strings.Contains(got, "no marketdata_reads_total") {
		t.Errorf("empty reads shown as %q", got)
	}
}

func TestParseLabels(t *testing.T) {
	l, ok := parseLabels(`marketdata_reads_total{layer="memory",resource="prices"}`, readsMetric)
	if !ok || l["layer"] != "memory" || l["resource"] != "prices" || len(l) != 2 {
		t.Errorf("parseLabels = %v, %v", l, ok)
	}
	for _, s := range []string{"marketdata_reads_total", `marketdata_reads_totalx{a="b"}`, `marketdata_reads_total{a=b}`} {
		if _, ok := parseLabels(s, readsMetric); ok {
			t.Errorf("parseLabels(%q) ok", s)
		}
	}
}

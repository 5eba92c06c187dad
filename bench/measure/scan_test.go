package measure

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// renderItem is the API's price item for market id at version v, rendered by
// the cache's own code.
func renderItem(t *testing.T, id string, v int64) []byte {
	t.Helper()
	a, b := "KX-1", "slug-1"
	bid, ask, last := 0.41, 0.43, 0.42
	now := time.Now()
	doc := cache.Rules{Now: time.Now}.RenderMarket(store.MarketDoc{
		ID:     id,
		Market: &store.Market{ID: id, EventID: "ev_1", Version: 1, Status: store.StatusActive, Venues: map[string]string{"venue_a": "x"}, UpdatedAt: now},
		Event: &store.Event{ID: "ev_1", Version: 1, Title: "t", Category: "c", Status: store.StatusActive,
			VenueIDs: [4]*string{&a, &b}, UpdatedAt: now},
		Price: &store.Price{MarketID: id, Version: v, TS: now, Quotes: map[string]store.Quote{
			"venue_a": {Bid: &bid, Ask: &ask, Last: &last, Volume24h: 12},
			"venue_b": {Bid: &bid, Ask: &ask, Last: &last, Volume24h: 34},
		}},
	})
	if len(doc.Body) == 0 {
		t.Fatalf("market %s rendered no price item (served %v)", id, doc.Served)
	}
	return doc.Body
}

func TestScanVersionsReadsRenderedItems(t *testing.T) {
	items := [][]byte{renderItem(t, "mk_a", 7), renderItem(t, "mk_c", 123456789)}
	body := slices.Concat([]byte(`{"data":[`), bytes.Join(items, []byte(",")), []byte(`],"missing":["mk_b"]}`))
	ids := []string{"mk_a", "mk_b", "mk_c"}
	got := make([]int64, len(ids))
	n, err := ScanVersions(body, ids, got)
	if err != nil || n != 2 || !slices.Equal(got, []int64{7, 0, 123456789}) {
		t.Fatalf("scanVersions = %d, %v, %v; want 2, [7 0 123456789], nil", n, got, err)
	}
	if err := CheckScan(body, ids); err != nil {
		t.Fatalf("checkScan: %v", err)
	}
	// Items out of request order are refused, not misread.
	if _, err := ScanVersions(body, []string{"mk_c", "mk_a"}, got[:2]); !errors.Is(err, errLayout) {
		t.Fatalf("scan out of order: err = %v, want errLayout", err)
	}
}

// A layout the scan would misread (version before market_id) is caught by
// the full decode that runs on every captured answer before a run.
func TestCheckScanCatchesLayoutChange(t *testing.T) {
	body := []byte(`{"data":[{"version":7,"market_id":"mk_a"},{"version":9,"market_id":"mk_b"}],"missing":[]}`)
	if err := CheckScan(body, []string{"mk_a", "mk_b"}); !errors.Is(err, errLayout) {
		t.Fatalf("checkScan = %v, want errLayout", err)
	}
}

func TestDurHistQuantilesBoundTheTruth(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h DurHist
	xs := make([]int64, 100_000)
	for i := range xs {
		xs[i] = int64(r.ExpFloat64() * 20_000) // µs, mean 20 ms
		h.Add(xs[i])
	}
	slices.Sort(xs)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		truth := float64(xs[int(q*float64(len(xs)))-1]) / 1000
		got, ok := h.QuantileMS(q, 0)
		if !ok || got < truth-0.01 || got > truth*1.02+0.01 {
			t.Errorf("q%.2f = %.3f ms, truth %.3f ms: want at most 2 %% above", q, got, truth)
		}
	}
	// Samples ranked above every bucket push the high quantiles out.
	if _, ok := h.QuantileMS(0.99, 2000); ok {
		t.Error("q0.99 with 2 % of samples beyond: want not ok")
	}
	for i := range HistBuckets {
		if HistIndex(histUpper(i)) != i || (i > 0 && HistIndex(histUpper(i-1)+1) != i) {
			t.Fatalf("bucket %d: upper %d maps to %d", i, histUpper(i), HistIndex(histUpper(i)))
		}
	}
}

// TestDurHistMerge: per-connection histograms merged answer as one
// histogram of all their samples would, count and maximum included.
func TestDurHistMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var all, merged DurHist
	parts := make([]DurHist, 4)
	for i := range 40_000 {
		us := int64(r.ExpFloat64() * 5_000)
		all.Add(us)
		parts[i%len(parts)].Add(us)
	}
	parts[2].Add(900_000) // one connection saw a far outlier
	all.Add(900_000)
	for i := range parts {
		merged.Merge(&parts[i])
	}
	if merged.N != all.N || merged.Max != all.Max || merged.Counts != all.Counts {
		t.Fatalf("merged n %d max %d, want %d and %d and the same buckets", merged.N, merged.Max, all.N, all.Max)
	}
	for _, q := range []float64{0.5, 0.99, 1} {
		got, _ := merged.QuantileMS(q, 0)
		want, _ := all.QuantileMS(q, 0)
		if got != want {
			t.Errorf("q%.2f: merged %.2f ms, one histogram %.2f ms", q, got, want)
		}
	}
	if got, _ := merged.QuantileMS(1, 0); got != 900 {
		t.Errorf("q1 = %v ms, want the outlier's 900", got)
	}
}

func TestDurHistEmpty(t *testing.T) {
	var h DurHist
	if ms, ok := h.QuantileMS(0.99, 0); ms != 0 || !ok {
		t.Errorf("q0.99 of no samples = %v, %v; want 0, ok", ms, ok)
	}
	// Only samples beyond every bucket: no quantile is known.
	if _, ok := h.QuantileMS(0.5, 3); ok {
		t.Error("q0.5 with every sample beyond the buckets: want not ok")
	}
}

package store_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/marketdata/marketdata/store"
)

// TestInvertPrice: 1 − p prints as the decimal a reader expects, with no
// float artefact, for every price of a venue's grid.
func TestInvertPrice(t *testing.T) {
	for _, c := range []struct {
		p    float64
		want string
	}{
		{0.7, "0.3"}, {0.3, "0.7"}, {0.1, "0.9"}, {0.9, "0.1"}, {0, "1"}, {1, "0"},
		{0.42, "0.58"}, {0.575, "0.425"}, {0.123, "0.877"}, {0.000001, "0.999999"}, {0.5, "0.5"},
	} {
		if got := strconv.FormatFloat(store.InvertPrice(c.p), 'f', -1, 64); got != c.want {
			t.Errorf("InvertPrice(%v) prints %s, want %s", c.p, got, c.want)
		}
	}
	seven := 0.7 // a variable: constant arithmetic would be exact
	if got := 1 - seven; strconv.FormatFloat(got, 'f', -1, 64) == "0.3" {
		t.Fatal("1 - 0.7 prints 0.3 unrounded: the test no longer shows the artefact it guards against")
	}
	// Every price on a tenth-of-a-cent grid: the inverse is the grid's
	// mirror, printed as such, and inverting twice gives the price back.
	for k := 0; k <= 1000; k++ {
		p, _ := strconv.ParseFloat(strconv.FormatFloat(float64(k)/1000, 'f', 3, 64), 64)
		want, _ := strconv.ParseFloat(strconv.FormatFloat(float64(1000-k)/1000, 'f', 3, 64), 64)
		if got := store.InvertPrice(p); got != want || math.Signbit(got) {
			t.Fatalf("InvertPrice(%v) = %v, want %v", p, got, want)
		}
		if got := store.InvertPrice(store.InvertPrice(p)); got != p {
			t.Fatalf("InvertPrice twice of %v = %v", p, got)
		}
	}
}

func TestQuoteInvert(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	got := store.Quote{Bid: f(0.62), Ask: nil, Last: f(0.7), Volume24h: 5}.Invert()
	if got.Bid != nil || got.Ask == nil || *got.Ask != 0.38 || got.Last == nil || *got.Last != 0.3 || got.Volume24h != 5 {
		t.Errorf("Invert: got bid %v ask %v last %v volume %v, want nil 0.38 0.3 5", got.Bid, got.Ask, got.Last, got.Volume24h)
	}
}

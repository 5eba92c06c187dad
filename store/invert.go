package store

import "math"

// InvertPrice is 1 − p: a complement venue's price in our market's terms (its
// YES is our NO). The difference is rounded to 1e-9, finer than any venue's
// grid, so that it prints as the decimal a reader expects: 1 − 0.7 is
// 0.30000000000000004 in float64, and 0.3 here.
func InvertPrice(p float64) float64 {
	return math.Round((1-p)*1e9) / 1e9
}

// Invert is a complement venue's quote in our market's terms: its bid is
// 1 − the venue's ask, its ask 1 − its bid (a side the venue leaves empty
// leaves the other side empty), its last 1 − its last.
func (q Quote) Invert() Quote {
	return Quote{Bid: invertRef(q.Ask), Ask: invertRef(q.Bid), Last: invertRef(q.Last), Volume24h: q.Volume24h}
}

func invertRef(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := InvertPrice(*p)
	return &v
}

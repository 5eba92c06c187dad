package feed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Crypto, weather, entertainment and science.

func cryptoPrice(r *rand.Rand, now time.Time, n int) (draft, bool) {
	c := pick(r, coins)
	d := futureDay(r, now, 2, 200)
	spot := c.base * (0.9 + 0.2*r.Float64())
	// About 3.5% daily volatility, growing with the square root of time.
	sd := spot * math.Min(0.6, 0.035*math.Sqrt(days(now, d)))
	step := c.step * math.Max(1, math.Round(sd/c.step/2))
	th := positive(around(n, spot, step, c.step), step)
	return ladderOf(draft{
		title:    fmt.Sprintf("%s price on %s?", c.name, d.Format(time.DateOnly)),
		category: "crypto", stem: c.code, code: dayCode(d),
		labels: dollars(th, step),
	}, th, spot, sd), true
}

// cryptoTouch asks how high a coin gets before a date: the latent quantity
// is its running maximum, which starts at about today's price.
func cryptoTouch(r *rand.Rand, now time.Time, n int) (draft, bool) {
	c := pick(r, coins)
	d := futureDay(r, now, 30, 400)
	spot := c.base * (0.9 + 0.2*r.Float64())
	sd := spot * math.Min(0.6, 0.03*math.Sqrt(days(now, d)))
	step := c.step * 2
	start := math.Ceil(spot*1.05/step) * step
	th := make([]float64, n)
	for i := range th {
		th[i] = start + step*float64(i)
	}
	return ladderOf(draft{
		title:    fmt.Sprintf("How high will %s go before %s?", c.name, monthYear(d)),
		category: "crypto", stem: c.code + "MAX", code: monthCode(d),
		labels: dollars(th, step),
	}, th, spot*1.04, sd), true
}

// highTemperature is a ladder around the city's normal high for the day's
// month; the forecast is sharper for near days.
func highTemperature(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 20 {
		return draft{}, false
	}
	c := pick(r, cities)
	d := futureDay(r, now, 1, 60)
	normal := c.highF[d.Month()-1]
	sd := math.Min(7, 2+days(now, d)/6)
	mu := normal + 0.6*sd*r.NormFloat64()
	th := around(n, 2*math.Round(mu/2), 2, 2)
	return ladderOf(draft{
		title:    fmt.Sprintf("Highest temperature in %s on %s?", c.name, d.Format(time.DateOnly)),
		category: "weather", stem: "HIGH" + c.code, code: dayCode(d),
		labels: format(th, "%.0f°F or above"),
	}, th, mu, sd), true
}

// snowfall asks about a month's snow only in a city and month that get some.
func snowfall(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 10 {
		return draft{}, false
	}
	var snowy []city
	for _, c := range cities {
		if slices.Max(c.snowIn[:]) >= minSnowyMonth {
			snowy = append(snowy, c)
		}
	}
	c := pick(r, snowy)
	d := firstOfMonth(futureDay(r, now, 20, 300))
	for c.snowIn[d.Month()-1] < minSnowyMonth {
		d = d.AddDate(0, 1, 0)
	}
	mean := c.snowIn[d.Month()-1]
	step := math.Max(1, math.Round(mean/4))
	th := positive(around(n, mean, step, 1), 1)
	return ladderOf(draft{
		title:    fmt.Sprintf("How much snow will fall in %s in %s?", c.name, monthYear(d)),
		category: "weather", stem: "SNOW" + c.code, code: monthCode(d),
		labels: format(th, "More than %.0f inches"),
	}, th, mean, 0.55*mean), true
}

// minSnowyMonth is the mean snowfall, in inches, a month needs for a
// snowfall market in it to make sense.
const minSnowyMonth = 2

func bestPicture(r *rand.Rand, now time.Time, n int) (draft, bool) {
	films := make([]string, 0, len(filmAdjectives)*len(filmNouns))
	for _, a := range filmAdjectives {
		for _, b := range filmNouns {
			films = append(films, "The "+a+" "+b)
		}
	}
	if n > 12 {
		return draft{}, false
	}
	year := now.Year() + 1
	return exclusiveOf(draft{
		title:    fmt.Sprintf("Which film wins Best Picture at the %d Oscars?", year),
		category: "entertainment", stem: "OSCARPIC", code: fmt.Sprintf("%02d", year%100),
		labels: pickShuffled(r, films, n),
	}), true
}

func chartTopper(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 15 {
		return draft{}, false
	}
	d := futureDay(r, now, 7, 120)
	return exclusiveOf(draft{
		title:    fmt.Sprintf("Which artist has the top song on the Billboard Hot 100 on %s?", d.Format(time.DateOnly)),
		category: "entertainment", stem: "HOT100", code: dayCode(d),
		labels: candidates(r, n),
	}), true
}

func launchDate(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 12 {
		return draft{}, false
	}
	m := pick(r, missions)
	first := firstOfMonth(futureDay(r, now, 60, 240))
	labels := make([]string, n)
	th := make([]float64, n)
	for i := range labels {
		labels[i] = "Before " + monthYear(first.AddDate(0, 2*i, 0))
		th[i] = float64(i + 1) // in steps of two months
	}
	d := first.AddDate(0, 2*(n-1), 0)
	dr := ladderOf(draft{
		title:    fmt.Sprintf("When will %s launch %s?", m.agency, m.mission),
		category: "science", stem: m.code, code: monthCode(d),
		labels: labels,
	}, th, float64(n)*(0.2+r.Float64())+1, 0.6+float64(n)/4)
	dr.upward = true
	return dr, true
}

// earthquake is a ladder on the month's strongest quake in the region.
func earthquake(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 8 { // 5.0 to 8.5
		return draft{}, false
	}
	region := pick(r, []struct {
		name, code string
		typical    float64 // a month's typical strongest magnitude there
	}{
		{"California", "CA", 4.6}, {"Japan", "JP", 5.9}, {"Chile", "CL", 5.6}, {"Indonesia", "ID", 5.9},
		{"Alaska", "AK", 5.4}, {"Turkey", "TR", 4.8},
	})
	d := futureDay(r, now, 20, 300)
	th := make([]float64, n)
	for i := range th {
		th[i] = 5.0 + 0.5*float64(i)
	}
	return ladderOf(draft{
		title:    fmt.Sprintf("How strong will the largest earthquake in %s be in %s?", region.name, monthYear(d)),
		category: "science", stem: "QUAKE" + region.code, code: monthCode(d),
		labels: format(th, "Magnitude %.1f+"),
	}, th, region.typical, 0.55), true
}

package feed

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Economics and politics: central banks, data prints, elections, laws.

func fedDecision(r *rand.Rand, now time.Time, n int) (draft, bool) {
	outcomes := []string{"Cut 50+ bps", "Cut 25 bps", "No change", "Hike 25 bps", "Hike 50+ bps"}
	if n > len(outcomes) {
		return draft{}, false
	}
	bank := pick(r, []struct{ name, stem string }{
		{"the Fed", "FEDDECISION"}, {"the ECB", "ECBRATE"}, {"the Bank of England", "BOERATE"}, {"the Bank of Japan", "BOJRATE"},
	})
	d := futureDay(r, now, 20, 400)
	// A contiguous window of outcomes around "No change": what a venue lists.
	lo := max(0, min(2-r.IntN(n), len(outcomes)-n))
	return exclusiveOf(draft{
		title:    fmt.Sprintf("What will %s decide at its %s meeting?", bank.name, monthYear(d)),
		category: "economics", stem: bank.stem, code: monthCode(d),
		labels: outcomes[lo : lo+n],
	}), true
}

func cpiPrint(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 20 {
		return draft{}, false
	}
	d := futureDay(r, now, 20, 300)
	mu := 2.2 + 0.15*r.NormFloat64() + 0.4*r.Float64()
	th := around(n, mu, 0.1, 0.1)
	return ladderOf(draft{
		title:    fmt.Sprintf("US CPI inflation for %s?", monthYear(d)),
		category: "economics", stem: "CPIYOY", code: monthCode(d),
		labels: format(th, "Above %.1f%%"),
	}, th, mu, 0.12+0.0006*days(now, d)), true
}

func unemployment(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 20 {
		return draft{}, false
	}
	d := futureDay(r, now, 20, 300)
	mu := 4.1 + 0.25*r.NormFloat64()
	th := around(n, mu, 0.1, 0.1)
	return ladderOf(draft{
		title:    fmt.Sprintf("US unemployment rate in %s?", monthYear(d)),
		category: "economics", stem: "U3", code: monthCode(d),
		labels: format(th, "Above %.1f%%"),
	}, th, mu, 0.08+0.0005*days(now, d)), true
}

func gdpGrowth(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 12 {
		return draft{}, false
	}
	d := futureDay(r, now, 60, 500)
	q := (int(d.Month())-1)/3 + 1
	mu := 1.8 + 0.8*r.NormFloat64()
	th := around(n, mu, 0.5, 0.5)
	return ladderOf(draft{
		title:    fmt.Sprintf("US GDP growth in Q%d %d?", q, d.Year()),
		category: "economics", stem: "GDP", code: fmt.Sprintf("%02dQ%d", d.Year()%100, q),
		labels: format(th, "Above %.1f%%"),
	}, th, mu, 0.9), true
}

func governorRace(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 8 {
		return draft{}, false
	}
	st := pick(r, states)
	year := now.Year() + 1 + r.IntN(2)
	return exclusiveOf(draft{
		title:    fmt.Sprintf("Who will win the %d %s governor race?", year, st.name),
		category: "politics", stem: "GOV" + st.code, code: fmt.Sprintf("%02d", year%100),
		labels: candidates(r, n),
	}), true
}

// snapElection is a "by <date>" ladder: the chance of an election by a date
// grows with the date.
func snapElection(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 12 {
		return draft{}, false
	}
	c := pick(r, countries)
	first := firstOfMonth(futureDay(r, now, 30, 200))
	labels := make([]string, n)
	th := make([]float64, n)
	for i := range labels {
		labels[i] = "By " + monthYear(first.AddDate(0, i, 0))
		th[i] = float64(i + 1) // the end of the i-th month
	}
	d := first.AddDate(0, n, 0)
	dr := ladderOf(draft{
		title:    fmt.Sprintf("Will %s hold a snap election before %s?", c.name, monthYear(d)),
		category: "politics", stem: "SNAP" + c.code, code: monthCode(d),
		labels: labels,
	}, th, float64(n)*(0.3+1.2*r.Float64()), 0.7+float64(n)/4)
	dr.upward = true
	return dr, true
}

func seatCount(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 15 {
		return draft{}, false
	}
	c := pick(r, countries)
	party := pick(r, []string{"Social Democrats", "Conservatives", "Greens", "Liberals", "Labour Party", "Centre Party"})
	year := now.Year() + 1 + r.IntN(2)
	mu := 60 + 60*r.Float64()
	th := positive(around(n, mu, 10, 10), 10)
	return ladderOf(draft{
		title:    fmt.Sprintf("How many seats will the %s win in the %d %s election?", party, year, c.name),
		category: "politics", stem: "SEATS" + c.code, code: fmt.Sprintf("%02d", year%100),
		labels: format(th, "%.0f or more seats"),
	}, th, mu, 12+6*r.Float64()), true
}

// minimumWage asks, state by state, independent questions.
func minimumWage(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > len(states) {
		return draft{}, false
	}
	year := now.Year() + 1
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = s.name
	}
	return draft{
		title:    fmt.Sprintf("Which states will raise their minimum wage in %d?", year),
		category: "politics", stem: "MINWAGE", code: fmt.Sprintf("%02d", year%100),
		labels: pickShuffled(r, names, n), kind: binary,
	}, true
}

// speechMentions asks, word by word, independent questions about a speech.
func speechMentions(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > len(mentionWords) {
		return draft{}, false
	}
	sp := pick(r, speakers)
	d := futureDay(r, now, 5, 90)
	return draft{
		title:    fmt.Sprintf("Which words will %s say at the %s %s?", sp.who, d.Format("January 2"), sp.occasion),
		category: "politics", stem: sp.code + "MENTION", code: dayCode(d),
		labels: pickShuffled(r, mentionWords, n), kind: binary,
	}, true
}

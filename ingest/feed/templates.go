package feed

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// draft is a freshly invented event before it gets ids: its title, category,
// the pieces of its venue_a ticker and one label per market.
type draft struct {
	title    string
	category string
	stem     string // venue_a series stem, e.g. "FEDCUT" (ticker "KXFEDCUT-27MAR")
	code     string // venue_a date/matchup code, e.g. "27MAR" or "27JAN14LALBOS"
	labels   []string
}

// template invents one event with n markets, dated after now.
type template func(r *rand.Rand, now time.Time, n int) draft

// templates are the kinds of events the feed invents, spread over categories.
var templates = []template{
	fedDecision, cpiPrint, unemployment, gdpGrowth,
	governorRace, snapElection, seatCount,
	gameWinner, championship,
	cryptoPrice, cryptoTouch,
	highTemperature, snowfall,
	bestPicture, chartTopper,
	launchDate, earthquake,
}

func fedDecision(r *rand.Rand, now time.Time, n int) draft {
	bank := pick(r, []struct{ name, stem string }{
		{"the Fed", "FEDCUT"}, {"the ECB", "ECBRATE"}, {"the Bank of England", "BOERATE"}, {"the Bank of Japan", "BOJRATE"},
	})
	d := futureDay(r, now, 20, 400)
	return draft{
		title:    fmt.Sprintf("Will %s cut rates in %s?", bank.name, monthYear(d)),
		category: "economics", stem: bank.stem, code: monthCode(d),
		labels: pickOrdered(r, []string{"Cut 50+ bps", "Cut 25 bps", "No change", "Hike 25 bps", "Hike 50+ bps", "Emergency cut"}, n),
	}
}

func cpiPrint(r *rand.Rand, now time.Time, n int) draft {
	d := futureDay(r, now, 20, 300)
	return draft{
		title:    fmt.Sprintf("US CPI inflation for %s?", monthYear(d)),
		category: "economics", stem: "CPIYOY", code: monthCode(d),
		labels: steps(n, 1.6+0.1*float64(r.IntN(10)), 0.2, "Above %.1f%%"),
	}
}

func unemployment(r *rand.Rand, now time.Time, n int) draft {
	d := futureDay(r, now, 20, 300)
	return draft{
		title:    fmt.Sprintf("US unemployment rate in %s?", monthYear(d)),
		category: "economics", stem: "U3", code: monthCode(d),
		labels: steps(n, 3.5+0.1*float64(r.IntN(8)), 0.1, "Above %.1f%%"),
	}
}

func gdpGrowth(r *rand.Rand, now time.Time, n int) draft {
	d := futureDay(r, now, 60, 500)
	q := (int(d.Month())-1)/3 + 1
	return draft{
		title:    fmt.Sprintf("US GDP growth in Q%d %d?", q, d.Year()),
		category: "economics", stem: "GDP", code: fmt.Sprintf("%02dQ%d", d.Year()%100, q),
		labels: steps(n, -0.5+0.5*float64(r.IntN(3)), 0.5, "Above %.1f%%"),
	}
}

func governorRace(r *rand.Rand, now time.Time, n int) draft {
	st := pick(r, states)
	year := now.Year() + 1 + r.IntN(2)
	return draft{
		title:    fmt.Sprintf("Who will win the %d %s governor race?", year, st.name),
		category: "politics", stem: "GOV" + st.code, code: fmt.Sprintf("%02d", year%100),
		labels: candidates(r, n),
	}
}

func snapElection(r *rand.Rand, now time.Time, n int) draft {
	c := pick(r, countries)
	d := futureDay(r, now, 120, 500)
	labels := make([]string, n)
	for i := range labels {
		labels[i] = "By " + monthYear(d.AddDate(0, -(n-1-i), 0))
	}
	return draft{
		title:    fmt.Sprintf("Will %s hold a snap election before %s?", c.name, monthYear(d)),
		category: "politics", stem: "SNAP" + c.code, code: monthCode(d),
		labels: labels,
	}
}

func seatCount(r *rand.Rand, now time.Time, n int) draft {
	c := pick(r, countries)
	party := pick(r, []string{"Social Democrats", "Conservatives", "Greens", "Liberals", "Labour Party", "Centre Party"})
	year := now.Year() + 1 + r.IntN(2)
	return draft{
		title:    fmt.Sprintf("How many seats will the %s win in the %d %s election?", party, year, c.name),
		category: "politics", stem: "SEATS" + c.code, code: fmt.Sprintf("%02d", year%100),
		labels: steps(n, float64(40+10*r.IntN(6)), 20, "%.0f or more seats"),
	}
}

func gameWinner(r *rand.Rand, now time.Time, n int) draft {
	lg := pick(r, leagues)
	ij := r.Perm(len(lg.teams))
	home, away := lg.teams[ij[0]], lg.teams[ij[1]]
	d := futureDay(r, now, 1, 120)
	total := lg.total + lg.totalStep*r.IntN(3)
	labels := pickOrdered(r, []string{
		home.name, away.name,
		fmt.Sprintf("Over %d.5 %s", total, lg.unit), fmt.Sprintf("Under %d.5 %s", total, lg.unit),
		fmt.Sprintf("%s by %d+", home.name, lg.margin), fmt.Sprintf("%s by %d+", away.name, lg.margin),
		lg.extra,
	}, n)
	return draft{
		title:    fmt.Sprintf("%s vs %s: who wins on %s?", home.name, away.name, d.Format(time.DateOnly)),
		category: "sports", stem: lg.code + "GAME", code: dayCode(d) + home.code + away.code,
		labels: labels,
	}
}

func championship(r *rand.Rand, now time.Time, n int) draft {
	lg := pick(r, leagues)
	year := now.Year() + 1 + r.IntN(2)
	names := make([]string, len(lg.teams))
	for i, t := range lg.teams {
		names[i] = t.name
	}
	return draft{
		title:    fmt.Sprintf("Who will win the %d %s championship?", year, lg.name),
		category: "sports", stem: lg.code + "CHAMP", code: fmt.Sprintf("%02d", year%100),
		labels: pickShuffled(r, names, n),
	}
}

func cryptoPrice(r *rand.Rand, now time.Time, n int) draft {
	c := pick(r, coins)
	d := futureDay(r, now, 2, 200)
	base := c.base * (0.8 + 0.1*float64(r.IntN(5)))
	return draft{
		title:    fmt.Sprintf("%s price on %s?", c.name, d.Format(time.DateOnly)),
		category: "crypto", stem: c.code, code: dayCode(d),
		labels: dollarSteps(n, base, c.step),
	}
}

func cryptoTouch(r *rand.Rand, now time.Time, n int) draft {
	c := pick(r, coins)
	d := futureDay(r, now, 30, 400)
	return draft{
		title:    fmt.Sprintf("Will %s hit a new high by %s?", c.name, monthYear(d)),
		category: "crypto", stem: c.code + "MAX", code: monthCode(d),
		labels: dollarSteps(n, c.base*1.1, c.step*2),
	}
}

func highTemperature(r *rand.Rand, now time.Time, n int) draft {
	c := pick(r, cities)
	d := futureDay(r, now, 1, 60)
	return draft{
		title:    fmt.Sprintf("Highest temperature in %s on %s?", c.name, d.Format(time.DateOnly)),
		category: "weather", stem: "HIGH" + c.code, code: dayCode(d),
		labels: steps(n, float64(40+2*r.IntN(20)), 2, "%.0f°F or above"),
	}
}

func snowfall(r *rand.Rand, now time.Time, n int) draft {
	c := pick(r, cities)
	d := futureDay(r, now, 20, 300)
	return draft{
		title:    fmt.Sprintf("How much snow will fall in %s in %s?", c.name, monthYear(d)),
		category: "weather", stem: "SNOW" + c.code, code: monthCode(d),
		labels: steps(n, 1, 2, "More than %.0f inches"),
	}
}

func bestPicture(r *rand.Rand, now time.Time, n int) draft {
	year := now.Year() + 1
	films := make([]string, 0, len(filmAdjectives)*len(filmNouns))
	for _, a := range filmAdjectives {
		for _, b := range filmNouns {
			films = append(films, "The "+a+" "+b)
		}
	}
	return draft{
		title:    fmt.Sprintf("Which film wins Best Picture at the %d Oscars?", year),
		category: "entertainment", stem: "OSCARPIC", code: fmt.Sprintf("%02d", year%100),
		labels: pickShuffled(r, films, n),
	}
}

func chartTopper(r *rand.Rand, now time.Time, n int) draft {
	d := futureDay(r, now, 7, 120)
	return draft{
		title:    fmt.Sprintf("Top song on the Billboard Hot 100 on %s?", d.Format(time.DateOnly)),
		category: "entertainment", stem: "HOT100", code: dayCode(d),
		labels: candidates(r, n),
	}
}

func launchDate(r *rand.Rand, now time.Time, n int) draft {
	m := pick(r, missions)
	d := futureDay(r, now, 60, 540)
	labels := make([]string, n)
	for i := range labels {
		labels[i] = "Before " + monthYear(d.AddDate(0, -(n-1-i)*2, 0))
	}
	return draft{
		title:    fmt.Sprintf("Will %s launch %s before %s?", m.agency, m.mission, monthYear(d)),
		category: "science", stem: m.code, code: monthCode(d),
		labels: labels,
	}
}

func earthquake(r *rand.Rand, now time.Time, n int) draft {
	region := pick(r, []struct{ name, code string }{
		{"California", "CA"}, {"Japan", "JP"}, {"Chile", "CL"}, {"Indonesia", "ID"}, {"Alaska", "AK"}, {"Turkey", "TR"},
	})
	d := futureDay(r, now, 20, 300)
	return draft{
		title:    fmt.Sprintf("Will a major earthquake hit %s in %s?", region.name, monthYear(d)),
		category: "science", stem: "QUAKE" + region.code, code: monthCode(d),
		labels: steps(n, 5.5, 0.5, "Magnitude %.1f+"),
	}
}

// futureDay is a UTC midnight between minDays and maxDays after now.
func futureDay(r *rand.Rand, now time.Time, minDays, maxDays int) time.Time {
	d := now.UTC().AddDate(0, 0, minDays+r.IntN(maxDays-minDays+1))
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
}

func monthYear(t time.Time) string { return t.Format("January 2006") }

// monthCode is the venue_a month code, e.g. "27MAR".
func monthCode(t time.Time) string { return strings.ToUpper(t.Format("06Jan")) }

// dayCode is the venue_a day code, e.g. "27JAN14".
func dayCode(t time.Time) string { return strings.ToUpper(t.Format("06Jan02")) }

func pick[T any](r *rand.Rand, list []T) T { return list[r.IntN(len(list))] }

// pickOrdered chooses n items of list keeping their order, padding with
// "Other" outcomes when the list is too short.
func pickOrdered(r *rand.Rand, list []string, n int) []string {
	if n >= len(list) {
		return pad(slices.Clone(list), n)
	}
	idx := r.Perm(len(list))[:n]
	slices.Sort(idx)
	out := make([]string, n)
	for i, j := range idx {
		out[i] = list[j]
	}
	return out
}

// pickShuffled chooses n distinct items of list in random order.
func pickShuffled(r *rand.Rand, list []string, n int) []string {
	out := make([]string, 0, n)
	for _, j := range r.Perm(len(list)) {
		if len(out) == n {
			break
		}
		out = append(out, list[j])
	}
	return pad(out, n)
}

func pad(out []string, n int) []string {
	for i := 1; len(out) < n; i++ {
		out = append(out, fmt.Sprintf("Other %d", i))
	}
	return out
}

// steps formats n thresholds start, start+step, ... with format.
func steps(n int, start, step float64, format string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, start+step*float64(i))
	}
	return out
}

// dollarSteps formats n round dollar thresholds from about base.
func dollarSteps(n int, base, step float64) []string {
	start := float64(int64(base/step)) * step
	out := make([]string, n)
	for i := range out {
		out[i] = "Above $" + thousands(int64(start+step*float64(i)))
	}
	return out
}

// thousands writes v with comma separators, e.g. 95,000.
func thousands(v int64) string {
	s := fmt.Sprint(v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// candidates invents n distinct person names.
func candidates(r *rand.Rand, n int) []string {
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for len(out) < n {
		name := pick(r, firstNames) + " " + pick(r, lastNames)
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, name)
	}
	return out
}

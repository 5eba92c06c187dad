package feed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// kind is how the markets of an event constrain each other.
type kind uint8

const (
	// exclusive events have mutually exclusive outcomes, one of which wins:
	// the fair probabilities of their active markets sum to 1.
	exclusive kind = iota
	// ladder events ask whether one uncertain quantity ends beyond each of
	// several thresholds: one latent distribution prices them all, so the
	// probabilities are monotone along the thresholds.
	ladder
	// binary events hold independent yes/no questions.
	binary
)

func (k kind) String() string {
	switch k {
	case exclusive:
		return "exclusive"
	case ladder:
		return "ladder"
	default:
		return "binary"
	}
}

// draft is a freshly invented event before it gets ids: its title, category,
// the pieces of its venue_a ticker, one label per market and the model its
// fair values follow.
type draft struct {
	title    string
	category string
	stem     string // venue_a series stem, e.g. "FEDCUT" (ticker "KXFEDCUT-27MAR")
	code     string // venue_a date/matchup code, e.g. "27MAR" or "27JAN14LALBOS"
	labels   []string
	kind     kind

	// Ladders only: market i asks whether the latent quantity X ends above
	// thresholds[i] (or, with upward, at or below it: "by <date>" ladders,
	// whose probabilities grow along the thresholds). X is normal with mean
	// mu and standard deviation sd.
	thresholds []float64
	upward     bool
	mu, sd     float64
}

// template invents one event with n markets, dated after now. It reports
// false when it has no sensible event of n markets (a football match has two
// or three outcomes, a league a dozen teams); the caller picks another.
type template func(r *rand.Rand, now time.Time, n int) (draft, bool)

// templates are the kinds of events the feed invents, spread over categories.
var templates = []template{
	fedDecision, cpiPrint, unemployment, gdpGrowth,
	governorRace, snapElection, seatCount, minimumWage,
	gameWinner, gameTotal, championship,
	cryptoPrice, cryptoTouch,
	highTemperature, snowfall,
	bestPicture, chartTopper, speechMentions,
	launchDate, earthquake,
}

// exclusiveOf is an exclusive draft; with a single label it is a binary
// question ("Will X win?") since one outcome alone cannot sum to 1.
func exclusiveOf(d draft) draft {
	d.kind = exclusive
	if len(d.labels) == 1 {
		d.kind = binary
	}
	return d
}

// ladderOf is a ladder draft over thresholds with the latent mean mu and
// standard deviation sd.
func ladderOf(d draft, thresholds []float64, mu, sd float64) draft {
	d.kind, d.thresholds, d.mu, d.sd = ladder, thresholds, mu, sd
	return d
}

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

// gameWinner prices who wins a game: home or away (and a draw in football),
// split by margin when the venue lists more outcomes.
func gameWinner(r *rand.Rand, now time.Time, n int) (draft, bool) {
	lg := pick(r, leagues)
	ij := r.Perm(len(lg.teams))
	home, away := lg.teams[ij[0]], lg.teams[ij[1]]
	var labels []string
	narrow := fmt.Sprintf("1-%d", lg.margin-1)
	if lg.margin == 2 {
		narrow = "1"
	}
	switch draws := lg.draws; {
	case n == 1:
		labels = []string{home.name}
	case n == 2 && !draws, n == 3 && draws:
		labels = []string{home.name, away.name}
	case n == 4 && !draws, n == 5 && draws:
		labels = []string{
			fmt.Sprintf("%s by %s", home.name, narrow), fmt.Sprintf("%s by %d+", home.name, lg.margin),
			fmt.Sprintf("%s by %s", away.name, narrow), fmt.Sprintf("%s by %d+", away.name, lg.margin),
		}
	default:
		return draft{}, false
	}
	if len(labels) < n {
		labels = append(labels, "Draw")
	}
	d := futureDay(r, now, 1, 120)
	return exclusiveOf(draft{
		title:    fmt.Sprintf("%s vs %s: who wins on %s?", home.name, away.name, d.Format(time.DateOnly)),
		category: "sports", stem: lg.code + "GAME", code: dayCode(d) + home.code + away.code,
		labels: labels,
	}), true
}

// gameTotal is the over/under ladder of one game's total score.
func gameTotal(r *rand.Rand, now time.Time, n int) (draft, bool) {
	if n > 10 {
		return draft{}, false
	}
	lg := pick(r, leagues)
	ij := r.Perm(len(lg.teams))
	home, away := lg.teams[ij[0]], lg.teams[ij[1]]
	d := futureDay(r, now, 1, 120)
	step := float64(lg.totalStep)
	mu := float64(lg.total) + step*r.NormFloat64()
	th := positive(around(n, mu, step, 1), step)
	for i := range th {
		th[i] += 0.5 // half points: no push
	}
	return ladderOf(draft{
		title:    fmt.Sprintf("%s vs %s on %s: total %s?", home.name, away.name, d.Format(time.DateOnly), lg.unit),
		category: "sports", stem: lg.code + "TOTAL", code: dayCode(d) + home.code + away.code,
		labels: format(th, "Over %.1f "+lg.unit),
	}, th, mu, 2*step), true
}

func championship(r *rand.Rand, now time.Time, n int) (draft, bool) {
	lg := pick(r, leagues)
	if n > len(lg.teams) {
		return draft{}, false
	}
	year := now.Year() + 1 + r.IntN(2)
	names := make([]string, len(lg.teams))
	for i, t := range lg.teams {
		names[i] = t.name
	}
	return exclusiveOf(draft{
		title:    fmt.Sprintf("Who will win the %d %s championship?", year, lg.name),
		category: "sports", stem: lg.code + "CHAMP", code: fmt.Sprintf("%02d", year%100),
		labels: pickShuffled(r, names, n),
	}), true
}

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

// around is n thresholds step apart, centred on about center and rounded to
// multiples of grain.
func around(n int, center, step, grain float64) []float64 {
	start := math.Round((center-step*float64(n-1)/2)/grain) * grain
	out := make([]float64, n)
	for i := range out {
		out[i] = start + step*float64(i)
	}
	return out
}

// positive shifts thresholds up by multiples of step until the lowest is at
// least least: counts and prices are not negative.
func positive(th []float64, least float64) []float64 {
	if len(th) == 0 || th[0] >= least {
		return th
	}
	shift := math.Ceil((least-th[0])/least) * least
	for i := range th {
		th[i] += shift
	}
	return th
}

func format(th []float64, f string) []string {
	out := make([]string, len(th))
	for i, t := range th {
		out[i] = fmt.Sprintf(f, t+0) // +0: no "-0"
	}
	return out
}

// dollars labels price thresholds step apart: "Above $95,000", or with
// cents when the step is under a dollar ("Above $2.70").
func dollars(th []float64, step float64) []string {
	out := make([]string, len(th))
	for i, t := range th {
		if step < 1 {
			out[i] = fmt.Sprintf("Above $%.2f", t)
			continue
		}
		out[i] = "Above $" + thousands(int64(math.Round(t)))
	}
	return out
}

func days(now, d time.Time) float64 { return math.Max(0, d.Sub(now).Hours()/24) }

// futureDay is a UTC midnight between minDays and maxDays after now.
func futureDay(r *rand.Rand, now time.Time, minDays, maxDays int) time.Time {
	d := now.UTC().AddDate(0, 0, minDays+r.IntN(maxDays-minDays+1))
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
}

func firstOfMonth(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func monthYear(t time.Time) string { return t.Format("January 2006") }

// monthCode is the venue_a month code, e.g. "27MAR".
func monthCode(t time.Time) string { return strings.ToUpper(t.Format("06Jan")) }

// dayCode is the venue_a day code, e.g. "27JAN14".
func dayCode(t time.Time) string { return strings.ToUpper(t.Format("06Jan02")) }

func pick[T any](r *rand.Rand, list []T) T { return list[r.IntN(len(list))] }

// pickShuffled chooses n distinct items of list (n ≤ len(list)) in random
// order.
func pickShuffled(r *rand.Rand, list []string, n int) []string {
	out := make([]string, 0, n)
	for _, j := range r.Perm(len(list))[:n] {
		out = append(out, list[j])
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

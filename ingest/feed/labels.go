package feed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Helpers the templates build thresholds, labels and dates with.

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

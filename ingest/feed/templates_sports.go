package feed

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Sports: games, totals and championships.

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

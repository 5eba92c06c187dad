package feed

import (
	"math/rand/v2"
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

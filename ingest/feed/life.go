package feed

import "time"

// The lifecycle paced by the clock (GenConfig.EventLife). Left to the
// message stream, resolutions, merges and new events come with 3% of the
// changes, so how long a market lives depends on the rate: at the dev
// feed's 50 messages a second over some 800 markets, about four minutes,
// too short for its candles over the last hours to show anything. Paced by
// the clock, a lifecycle change comes on average every EventLife divided
// by the live events, whatever the rate: with 200 events and a 12 h
// EventLife (dev's), one every 216 s, so a demo still sees markets resolve
// and events appear, while a market lives about a day and trades all along.

// lifeChange makes a lifecycle change when EventLife paces them and one is
// due at now, and reports whether it made one. The change is drawn as the
// message stream would draw it, but for the event updates, which stay in
// the stream (rareChange).
func (g *Generator) lifeChange(now time.Time) bool {
	if g.cfg.EventLife <= 0 || g.lifeDue.After(now) {
		return false
	}
	x := g.rng.Float64() * (1 - shareUpdateEvent)
	if x >= shareResolveMarket {
		x += shareUpdateEvent
	}
	g.worldChange(x, now)
	g.lifeDue = now.Add(g.lifeGap())
	return true
}

// lifeGap draws the time to the next lifecycle change: exponential, with a
// mean of EventLife shared among the live events.
func (g *Generator) lifeGap() time.Duration {
	mean := float64(g.cfg.EventLife) / float64(max(1, len(g.liveEvents)))
	return time.Duration(g.rng.ExpFloat64() * mean)
}

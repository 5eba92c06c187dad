// Package feed is a synthetic upstream matcher for demos and load tests.
//
// A Generator holds a deterministic, seeded world of cross-venue events, their
// markets, per-venue quotes and trades, and turns it into the NATS messages of
// the ingest contract (§4): first the full state (Initial), then an endless
// stream of random changes (Next). Run publishes those messages to JetStream at
// a chosen rate.
//
// Prices are coherent (docs/matchers.md, "The synthetic feed"): each market
// has one fair probability, consistent within its event (an exclusive
// event's outcomes sum to 1, a ladder's thresholds are monotone, binary
// markets are independent); venues quote around it with small spreads and
// biases; a resolved market gets a settlement price (no bid or ask, last 1
// or 0) and then no more prices or trades. Most events and their markets
// carry match metadata (matches.go), some of it weak, some venues quoting a
// market's NO as their YES (complement), which they quote, trade and settle
// in their own terms.
//
// How long markets live is set by GenConfig.EventLife (life.go). With it,
// as `marketdata dev` and `marketdata feed` run (12 h), resolutions, merges
// and new events are paced by the clock, about one per live event per
// EventLife whatever the rate: markets live about a day and trade all
// along (at dev's 50 messages a second over some 800 markets, 36 trades
// and 180 price updates a market an hour), so their candles over the last
// hours look like a market's. Without it they come with 3% of the
// changes, so at the same rate a market lives about four minutes: the
// tests use that to meet every kind of change within seconds.
//
// The hot set keeps a demo's first calls live. In a world of hundreds of
// markets sharing tens of messages a second, any one market changes every
// 20–60 s; so a handful of markets, those of the first events (lowest ids)
// listed on three venues or more — the ones the README's examples pick with
// `events?limit=1&min_venues=3` — get a new price every 0.8–1.4 s, and one
// of them trades every 0.4–1 s, from the first changes on. With the default
// seed these are mk_000002_01 … mk_000002_04 and mk_000004_01,
// mk_000004_02. The hot changes are timed by the generator's clock and take
// a share of the configured rate (about seven messages a second, at most
// every other change) rather than adding to it. Hot events neither resolve
// nor merge into another, so the README's lines keep finding them.
//
// Every message the generator produces is valid under ingest.Decode. Versions
// increase by one per change of each entity, starting just above the clock's
// reading in microseconds when the generator was made: a restarted feed thus
// supersedes what an earlier run left in the store instead of being ignored
// as stale. Every message carries a Nats-Msg-Id that is unique per distinct
// message, so republishing the same state is deduplicated by JetStream and
// ignored by ingest.
//
// A restart continues the world rather than replaying it. The seed alone
// makes the initial world (the same events, markets, titles and venue ids
// run after run, so ids in a README or a bookmark keep working); what
// happens next is drawn from the seed and the run (the clock at start), so
// a restarted feed makes other price moves and other trades, with trade ids
// and timestamps of its own, instead of the earlier run's trades again under
// new ids. The events a run adds are the seed's too: the n-th event is the
// same in every run (drawn from the seed and n), so a restart adds the same
// events under the same ids, at other times, and never gives an id to
// another event. The run does not read back what an earlier run left: it
// starts again from the initial world's prices and statuses (at higher
// versions), so what an earlier run resolved or merged is active again, and
// an event an earlier run added stays as it left it until this run adds it.
package feed

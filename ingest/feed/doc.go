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
// or 0) and then no more prices or trades.
//
// Every message the generator produces is valid under ingest.Decode. Versions
// increase by one per change of each entity, starting just above the clock's
// reading in microseconds when the generator was made: a restarted feed thus
// supersedes what an earlier run left in the store instead of being ignored
// as stale. Every message carries a Nats-Msg-Id that is unique per distinct
// message, so republishing the same state is deduplicated by JetStream and
// ignored by ingest.
package feed

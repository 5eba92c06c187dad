package feed

import (
	"hash/fnv"
	"math/rand/v2"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// Match metadata (contract §3 "Match metadata"): how sure the matcher is of
// each venue link. Most events carry it, and their markets too:
//
//   - an event's link is identity most of the time, some subset, superset or
//     overlap; about one identity link in six is a weak one (confidence
//     0.35–0.75), the rest are sure (0.9–1, and 1 when made by hand);
//   - a market follows its event's link on the venue: a related event makes
//     related markets (same relation); an identity link is, for about one
//     market-venue link in eight, a complement: the venue lists the market's
//     NO as its YES, and quotes, trades and settles it in its own terms
//     (1 − our price), which the service shows inverted.
//
// Every link is drawn from the seed and the ids alone, never from the
// generator's other draws: the same seed gives the same metadata run after
// run, whenever a venue is listed, and the world's prices and titles are what
// they were before metadata existed.

// matchSalt derives a link's PCG words from the seed.
const matchSalt = 0xbf58476d1ce4e5b9

// noMetadata is the share of events (and their markets) sent without any.
const noMetadata = 0.15

// linkRand is the source of the draws of one link: entity id's link on venue
// v (v = 4: the entity itself).
func (g *Generator) linkRand(id string, v int) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(id)) // a hash.Hash never returns an error
	return rand.New(rand.NewPCG(g.cfg.Seed^matchSalt, h.Sum64()*5+uint64(v)))
}

// eventLink draws e's link on venue v; nil for an event sent without
// metadata.
func (g *Generator) eventLink(e *event, v int) *store.Match {
	if g.linkRand(e.id, 4).Float64() < noMetadata {
		return nil
	}
	r := g.linkRand(e.id, v)
	m := &store.Match{Relation: store.RelationIdentity, Method: pick(r, []string{"rules", "rules", "model", "model", "manual"})}
	switch x := r.Float64(); {
	case x < 0.04:
		m.Relation = store.RelationSubset
	case x < 0.08:
		m.Relation = store.RelationSuperset
	case x < 0.14:
		m.Relation = store.RelationOverlap
	}
	switch {
	case m.Method == "manual":
		m.Confidence = 1
	case m.Relation == store.RelationIdentity && r.Float64() >= 0.2:
		m.Confidence = cents(0.9 + 0.1*r.Float64())
	default:
		m.Confidence = cents(0.35 + 0.4*r.Float64())
	}
	return m
}

// marketLink draws m's link on venue v from its event's there: nil when the
// event has none.
func (g *Generator) marketLink(m *market, v int) *store.Match {
	ev := m.ev.links[v]
	if ev == nil {
		return nil
	}
	if ev.Relation != store.RelationIdentity {
		link := *ev
		return &link
	}
	r := g.linkRand(m.id, v)
	link := &store.Match{Relation: store.RelationIdentity, Confidence: ev.Confidence, Method: ev.Method}
	if r.Float64() < 0.125 {
		link.Relation, link.Confidence, link.Method = store.RelationComplement, cents(0.8+0.2*r.Float64()), "model"
	}
	return link
}

// complement reports whether m's venue v quotes m's NO as its YES.
func (m *market) complement(v int) bool {
	return m.links[v] != nil && m.links[v].Relation == store.RelationComplement
}

// matchesMsg is the matches field of a message: nil (left out) when no
// venue has metadata.
func matchesMsg(links *[4]*store.Match) ingest.MatchesMsg {
	var out ingest.MatchesMsg
	for v, l := range links {
		if l == nil {
			continue
		}
		if out == nil {
			out = make(ingest.MatchesMsg, 4)
		}
		out[venueName(v)] = &ingest.MatchMsg{Relation: ref(l.Relation), Confidence: ref(l.Confidence), Method: ref(l.Method)}
	}
	return out
}

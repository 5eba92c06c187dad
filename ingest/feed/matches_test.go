package feed

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// TestMatchesInWorld: most events and their markets carry match metadata,
// with every relation, some complements and some weak links among them, and
// some events carry none; a complement venue quotes the market's NO in its
// own terms, so the service's inverted quote sits with the other venues'.
func TestMatchesInWorld(t *testing.T) {
	g := newTestGenerator(t, 300, 1)
	msgs := decodeAll(t, ingest.DefaultSubjectPrefix, generate(t, g, 5_000))
	events := map[string]*store.Event{}
	markets := map[string]*store.Market{}
	for _, m := range msgs {
		switch m.Kind {
		case ingest.KindEvent:
			events[m.Event.ID] = m.Event
		case ingest.KindMarket:
			markets[m.Market.ID] = m.Market
		}
	}
	relations := map[string]int{}
	withMeta, weak := 0, 0
	for _, e := range events {
		if e.Matches.IsZero() {
			continue
		}
		withMeta++
		for i, x := range e.Matches {
			if (x != nil) != (e.VenueIDs[i] != nil) {
				t.Errorf("event %s: metadata on %s is %v, its id there %v: want metadata on every venue it has an id on", e.ID, store.Venues[i], x, e.VenueIDs[i])
			}
			if x != nil && x.Relation == store.RelationIdentity && x.Confidence < 0.8 {
				weak++
			}
		}
	}
	for _, mk := range markets {
		ev := events[mk.EventID]
		for i, x := range mk.Matches {
			if x == nil {
				if !ev.Matches.IsZero() && mk.Venues[store.Venues[i]] != "" {
					t.Errorf("market %s: no metadata on %s, its event has some", mk.ID, store.Venues[i])
				}
				continue
			}
			relations[x.Relation]++
			if e := ev.Matches[i]; e == nil || (e.Relation != x.Relation && !(e.Relation == store.RelationIdentity && x.Relation == store.RelationComplement)) {
				t.Errorf("market %s: %s link %v, its event's %v: want the event's relation, or complement for identity", mk.ID, store.Venues[i], x, e)
			}
		}
	}
	if share := float64(withMeta) / float64(len(events)); share < 0.75 || share > 0.95 {
		t.Errorf("%d of %d events (%.2f) carry metadata, want most but not all", withMeta, len(events), share)
	}
	for _, r := range store.Relations {
		if relations[r] == 0 {
			t.Errorf("no market link is %s: %v", r, relations)
		}
	}
	if weak == 0 {
		t.Error("no weak (confidence under 0.8) identity link")
	}
	t.Logf("%d of %d events with metadata, %d weak event links; market links by relation %v", withMeta, len(events), weak, relations)

	// The service's view (TestCoherence checks every quote): a complement
	// venue's inverted mid is near the market's fair value.
	v := newView()
	for _, m := range g.Initial() {
		v.apply(t, m)
	}
	checked := 0
	for _, m := range g.liveMarkets {
		for i, q := range m.quotes {
			if q == nil || !m.complement(i) {
				continue
			}
			shown := v.prices[m.id].Quotes[store.Venues[i]]
			if mid := (*shown.Bid + *shown.Ask) / 2; mid < m.quotedP-0.03 || mid > m.quotedP+0.03 {
				t.Errorf("market %s: complement venue %s shows mid %.3f, fair value %.3f", m.id, store.Venues[i], mid, m.quotedP)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no live complement quote")
	}
}

// TestMatchesAcrossRestarts: a link's metadata is the seed's, whatever the
// run: events a restarted feed adds again carry the same metadata.
func TestMatchesAcrossRestarts(t *testing.T) {
	c := &pacedClock{now: testEpoch}
	first := runPaced(t, 100, 1, c, 20*time.Millisecond, 4_000)
	c.now = c.now.Add(time.Second)
	second := runPaced(t, 100, 1, c, 20*time.Millisecond, 4_000)
	links := map[string]string{} // entity/venue → its metadata in the first run
	record := func(id string, ms store.Matches) {
		for i, x := range ms {
			if x != nil {
				b, _ := json.Marshal(x)
				links[id+"/"+store.Venues[i]] = string(b)
			}
		}
	}
	for _, m := range first {
		switch m.Kind {
		case ingest.KindEvent:
			record(m.Event.ID, m.Event.Matches)
		case ingest.KindMarket:
			record(m.Market.ID, m.Market.Matches)
		}
	}
	same := 0
	check := func(id string, ms store.Matches) {
		for i, x := range ms {
			if x == nil {
				continue
			}
			b, _ := json.Marshal(x)
			if was, ok := links[id+"/"+store.Venues[i]]; ok {
				if was != string(b) {
					t.Errorf("%s on %s: %s, the first run's was %s", id, store.Venues[i], b, was)
				}
				same++
			}
		}
	}
	for _, m := range second {
		switch m.Kind {
		case ingest.KindEvent:
			check(m.Event.ID, m.Event.Matches)
		case ingest.KindMarket:
			check(m.Market.ID, m.Market.Matches)
		}
	}
	if same < 100 {
		t.Errorf("%d links compared across the runs, want 100 or more", same)
	}
}

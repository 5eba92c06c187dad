package cache_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// filteredEvent is F<n>: on venues a and b, both identity at conf, or
// without metadata when conf < 0.
func filteredEvent(n int, conf float64) store.Event {
	e := activeEvent(fmt.Sprintf("F%02d", n), "politics", map[string]string{"a": "A", "b": "B"})
	if conf >= 0 {
		e.Matches[0], e.Matches[1] = m(store.RelationIdentity, conf, "rules"), m(store.RelationIdentity, 1, "rules")
	}
	return *e
}

// pageFrom reads a page and says which layer answered.
func (w *readerWorld) pageFrom(f store.ListFilter, after string, count int) (cache.Page, string) {
	w.t.Helper()
	before := map[string]float64{}
	for _, l := range []string{"memory", "redis", "store"} {
		before[l] = w.reads("page", l)
	}
	pg, err := w.r.Page(context.Background(), f, after, count)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, l := range []string{"memory", "redis", "store"} {
		if w.reads("page", l) > before[l] {
			return pg, l
		}
	}
	w.t.Fatal("page read counted in no layer")
	return pg, ""
}

// TestReaderFilteredPages: a filtered page is read from Redis with its scan
// bound and held in node memory under its filter (a page of one filter
// never answers another); a notice of an event in the range it examined,
// the events it skipped included, drops it, one above where it stopped
// does not; a walk sees metadata that changed between its pages; without
// the whole listing the store answers in full. The unfiltered read sends
// the script and keys it always did.
func TestReaderFilteredPages(t *testing.T) {
	w := newReaderWorld(t)
	ctx := context.Background()
	w.scan = 3
	w.reg = prometheus.NewRegistry()
	w.r = w.reader(w.c, w.st, w.reg)
	// E1 (no metadata), F01 (0.9), F02–F05 (none), F06 (0.8), F07 (0.4).
	batch := store.Batch{Events: []store.Event{filteredEvent(1, 0.9), filteredEvent(6, 0.8), filteredEvent(7, 0.4)}}
	for n := 2; n <= 5; n++ {
		batch.Events = append(batch.Events, filteredEvent(n, -1))
	}
	w.write(batch, true)
	if _, _, err := w.c.EnsureComplete(ctx, w.st); err != nil {
		t.Fatal(err)
	}
	w.synced("m1")
	ident := store.ListFilter{MatchFilter: store.MatchFilter{Relation: store.RelationIdentity}}
	sure := store.ListFilter{MatchFilter: store.MatchFilter{MinConfidence: 0.85}}
	check := func(what string, pg cache.Page, layer string, wantIDs []string, wantResume, wantLayer string) {
		t.Helper()
		if !slices.Equal(pg.IDs, wantIDs) || pg.Resume != wantResume || layer != wantLayer {
			t.Errorf("%s: %q resume %q from %s; want %q resume %q from %s", what, pg.IDs, pg.Resume, layer, wantIDs, wantResume, wantLayer)
		}
	}
	// Examines E1, F01, F02: the bound stops it.
	pg, l := w.pageFrom(ident, "", 10)
	check("identity, first read", pg, l, []string{"F01"}, "F02", "redis")
	pg, l = w.pageFrom(ident, "", 10)
	check("identity, again", pg, l, []string{"F01"}, "F02", "memory")
	pg, l = w.pageFrom(sure, "", 10)
	check("min_confidence 0.85, same set and range", pg, l, []string{"F01"}, "F02", "redis")
	if pg, held := w.r.PageHeld(store.ListFilter{}, "", 10); held {
		t.Errorf("unfiltered page held before any unfiltered read: %q", pg.IDs)
	}

	// F05, above where the page stopped, changes: the page stays; F02,
	// skipped inside its range, gains metadata: the page is dropped.
	w.write(store.Batch{Events: []store.Event{versioned(filteredEvent(5, 0.95), 2)}}, true)
	pg, l = w.pageFrom(ident, "", 10)
	check("after F05 changed", pg, l, []string{"F01"}, "F02", "memory")
	w.write(store.Batch{Events: []store.Event{versioned(filteredEvent(2, 0.95), 2)}}, true)
	pg, l = w.pageFrom(ident, "", 10)
	check("after F02 changed", pg, l, []string{"F01", "F02"}, "F02", "redis")

	// A walk: its second page sees F04's new metadata and not F01's loss.
	pg, l = w.pageFrom(sure, "F02", 10)
	check("min_confidence 0.85 after F02", pg, l, []string{"F05"}, "F05", "redis")
	w.write(store.Batch{Events: []store.Event{versioned(filteredEvent(1, -1), 2), versioned(filteredEvent(4, 0.9), 2)}}, true)
	pg, l = w.pageFrom(sure, "F02", 10)
	check("min_confidence 0.85 after F02, F04 changed", pg, l, []string{"F04", "F05"}, "F05", "redis")
	pg, l = w.pageFrom(sure, "F05", 10)
	check("min_confidence 0.85 after F05", pg, l, nil, "", "redis")

	// The unfiltered read: the same script and keys as before the filters.
	log := recordScripts(w.rdb)
	if _, l = w.pageFrom(store.ListFilter{}, "", 10); l != "redis" {
		t.Errorf("unfiltered page from %s, want redis", l)
	}
	for _, call := range log.snapshot() {
		if len(call.keys) != 3 || strings.Contains(strings.Join(call.keys, " "), "{i}:m") {
			t.Errorf("unfiltered page ran a script on %q %q", call.keys, call.args)
		}
	}

	// Without the whole listing the store answers, unbounded and unheld.
	if err := w.rdb.Del(ctx, strings.Replace(w.c.SetKey("x"), "f:x", "ok", 1)).Err(); err != nil {
		t.Fatal(err)
	}
	w.r.Notice(notice.Change{Flush: true})
	for range 2 {
		pg, l = w.pageFrom(ident, "", 10)
		check("identity from the store", pg, l, []string{"F02", "F04", "F05", "F06", "F07"}, "", "store")
	}
}

func versioned(e store.Event, v int64) store.Event {
	e.Version = v
	return e
}

package cache_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// The key layout of cache.go's package comment, checked on miniredis: the
// key names and types, and the hash slots that let Redis Cluster run every
// script on one node. Slots are computed with testenv.KeySlot (CRC16 of the
// hash tag, as Redis does); miniredis answers CLUSTER KEYSLOT with a
// constant, so it cannot be asked.

// TestKeySlot: the slot helper agrees with Redis (values from CLUSTER
// KEYSLOT of redis-server 7 in cluster mode), hash tags included.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":     12739,
		"foo":           12182,
		"bar":           5061,
		"somekey":       11058,
		"foo{hash_tag}": 2515,
		"{i}":           15759,
		"md:{i}:g":      15759,
		"md:{e:ev-1}":   4014,
		"foo{}{bar}":    8363, // an empty tag: the whole key is hashed
		"foo{{bar}}zap": 4015, // the tag is "{bar"
		"foo{bar}{zap}": 5061, // the first tag only: "bar"
	} {
		if got := testenv.KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestKeyNames: the key of each document is the documented one.
func TestKeyNames(t *testing.T) {
	c := cache.New(nil, "md:", testRules())
	for got, want := range map[string]string{
		c.EventKey("ev-1"):                  "md:{e:ev-1}",
		c.MarketKey("m-1"):                  "md:{m:m-1}",
		c.TradesKey("m-1"):                  "md:{m:m-1}:t",
		c.SetKey("politics:venue_a:3"):      "md:{i}:f:politics:venue_a:3",
		c.SetKey(cache.SetName("", "", "")): "md:{i}:f:*:*:1",
	} {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
}

// layoutBatch is a batch that writes every kind of document: listed and
// unlisted events, served and unserved markets, trades.
func layoutBatch() *store.Result {
	four := map[string]string{"a": "A", "b": "B", "c": "C", "d": "D"}
	ev := activeEvent("ev-1", "politics", four)
	ev2 := activeEvent("ev-2", "sports", map[string]string{"a": "A", "c": "C"})
	resolved := activeEvent("ev-3", "sports", map[string]string{"b": "B", "d": "D"})
	resolved.Status = store.StatusResolved
	m := activeMarket("m-1", "ev-1")
	price := &store.Price{MarketID: "m-1", Version: 1, TS: testNow, Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.3), ptr(0.4), nil, 5)}}
	return &store.Result{
		Events: []store.EventDoc{
			{ID: "ev-1", Rev: 1, Event: ev, Markets: []store.Market{m}},
			{ID: "ev-2", Rev: 2, Event: ev2},
			{ID: "ev-3", Rev: 3, Event: resolved},
		},
		Markets: []store.MarketDoc{{ID: "m-1", Rev: 4, Market: &m, Event: ev, Price: price}, {ID: "m-2", Rev: 5}},
		Trades: []store.Trade{
			{MarketID: "m-1", TradeID: "t1", Venue: "venue_a", Price: 0.5, Size: 1, Side: "buy", TS: testNow},
			{MarketID: "m-2", TradeID: "t2", Venue: "venue_b", Price: 0.5, Size: 1, Side: "sell", TS: testNow},
		},
	}
}

// TestKeyLayout: every key the writes, locks and cursors leave has a
// documented name and type, and the keys that scripts or pipelines use
// together share a slot: a market with its trade list, and everything of the
// listing ({i}: revisions, summaries, set names, ranking, sets, locks,
// cursors).
func TestKeyLayout(t *testing.T) {
	c, rdb, _ := miniCache(t)
	ctx := context.Background()
	apply(t, c, layoutBatch())
	if _, ok, err := c.TryLock(ctx, "antientropy", cache.NewLockToken(), time.Minute); !ok || err != nil {
		t.Fatalf("TryLock: %v, %v", ok, err)
	}
	if err := c.SetCursor(ctx, "antientropy", "ev-2"); err != nil {
		t.Fatal(err)
	}

	layout := []struct {
		re  *regexp.Regexp
		typ string
	}{
		{regexp.MustCompile(`^md:\{e:[^{}]+\}$`), "hash"},
		{regexp.MustCompile(`^md:\{m:[^{}]+\}$`), "hash"},
		{regexp.MustCompile(`^md:\{m:[^{}]+\}:t$`), "zset"},
		{regexp.MustCompile(`^md:\{i\}:[gsk]$`), "hash"},
		{regexp.MustCompile(`^md:\{i\}:v$`), "zset"},
		{regexp.MustCompile(`^md:\{i\}:f:[^:]+:[^:]+:[134]$`), "zset"},
		{regexp.MustCompile(`^md:\{i\}:ok$`), "string"},
		{regexp.MustCompile(`^md:\{i\}:(lock|cursor):.+$`), "string"},
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	listingSlot := testenv.KeySlot("md:{i}:g")
	seen := map[string]bool{}
	for _, key := range keys {
		tag := hashTag(key)
		if !strings.HasPrefix(tag, "e:") && !strings.HasPrefix(tag, "m:") && tag != "i" {
			// Not this layout's (another part of the cache keeps its own
			// keys under other tags); those are its own tests' concern.
			continue
		}
		typ, err := rdb.Type(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		matched := false
		for _, l := range layout {
			if l.re.MatchString(key) {
				matched = true
				seen[l.re.String()] = true
				if typ != l.typ {
					t.Errorf("%s is a %s, want a %s", key, typ, l.typ)
				}
			}
		}
		if !matched {
			t.Errorf("%s (a %s) is not in the documented layout", key, typ)
		}
		switch {
		case tag == "i" && testenv.KeySlot(key) != listingSlot:
			t.Errorf("%s is in slot %d, the listing's is %d", key, testenv.KeySlot(key), listingSlot)
		case strings.HasSuffix(key, ":t") && testenv.KeySlot(key) != testenv.KeySlot(strings.TrimSuffix(key, ":t")):
			t.Errorf("%s is not in the slot of its market's price item", key)
		}
	}
	// Every kind of key but the completeness marker (only a rebuild sets
	// it, which needs the store) was written.
	if len(seen) != len(layout)-1 {
		t.Errorf("the writes left %d kinds of keys, want %d: %v", len(seen), len(layout)-1, seen)
	}
}

// hashTag is what Redis Cluster hashes of key: the text between the first
// "{" and the next "}" when it is not empty, else the whole key.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// TestScriptsStayInOneSlot: every script the cache runs names keys of one
// slot, and the listing sets putListing builds from its key prefix argument
// are in that slot too: Redis Cluster runs each script on one node (it
// refuses keys of several slots with CROSSSLOT).
func TestScriptsStayInOneSlot(t *testing.T) {
	c, rdb, _ := miniCache(t)
	log := recordScripts(rdb)
	ctx := context.Background()
	apply(t, c, layoutBatch())
	// Move ev-1 to other sets, unlist ev-2: putListing removes from sets
	// named in {i}:k.
	moved := activeEvent("ev-1", "crypto", map[string]string{"b": "B", "c": "C", "d": "D"})
	gone := activeEvent("ev-2", "sports", map[string]string{"a": "A"})
	apply(t, c, &store.Result{Events: []store.EventDoc{{ID: "ev-1", Rev: 10, Event: moved}, {ID: "ev-2", Rev: 11, Event: gone}}})
	p := rdb.Pipeline()
	page := c.QueueListPage(p, "*:*:1", "", 10)
	p.Exec(ctx) //nolint:errcheck // the page's own result is checked below
	if _, _, err := c.ParseListPage(ctx, page, "*:*:1", "", 10); err != cache.ErrListingIncomplete {
		t.Fatalf("list page: %v, want ErrListingIncomplete (no rebuild marked it)", err)
	}
	release, ok, err := c.TryLock(ctx, "antientropy", cache.NewLockToken(), time.Minute)
	if !ok || err != nil {
		t.Fatalf("TryLock: %v, %v", ok, err)
	}
	release()

	calls := log.snapshot()
	scripts := map[string]bool{}
	for _, call := range calls {
		scripts[call.script] = true
		if len(call.keys) == 0 {
			t.Errorf("script %.12s ran with no keys: Redis Cluster cannot route it", call.script)
			continue
		}
		slot := testenv.KeySlot(call.keys[0])
		for _, k := range call.keys[1:] {
			if testenv.KeySlot(k) != slot {
				t.Errorf("script %.12s: keys %q and %q are in slots %d and %d", call.script, call.keys[0], k, slot, testenv.KeySlot(k))
			}
		}
		// A key prefix passed as an argument builds keys inside the script.
		for _, a := range call.args {
			if strings.HasPrefix(a, "md:") && testenv.KeySlot(a) != slot {
				t.Errorf("script %.12s: argument %q builds keys outside slot %d", call.script, a, slot)
			}
		}
		if len(call.keys) == 4 && strings.HasSuffix(call.keys[0], "{i}:g") && len(call.args) >= 6 {
			for _, set := range strings.Fields(call.args[5]) {
				if k := call.args[3] + set; testenv.KeySlot(k) != slot {
					t.Errorf("putListing builds %q in slot %d, its keys are in %d", k, testenv.KeySlot(k), slot)
				}
			}
		}
	}
	// putDoc, putListing, listPage, takeLock, releaseLock and nextSeq (the
	// change number every Apply takes) all ran.
	if len(scripts) != 6 {
		t.Errorf("%d distinct scripts ran (%d calls), want 6", len(scripts), len(calls))
	}
}

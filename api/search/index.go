package search

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Index answers /markets/search from memory (contract §3). Redis holds
// no index that ranks by "title starts with, then contains", and 50,000
// titles fit easily in a node, so every node keeps them all: a full Load at
// start and periodically (Run, the safety net for lost notices), and an
// Update of the ids each ingest change notice names.
//
// Readers never lock: they scan an immutable snapshot, already in answer
// order, that writers replace (copy-on-write) through an atomic pointer. The
// snapshot is a run of blocks of a few hundred entries, so an Update rebuilds
// only the blocks its ids leave or enter and shares the others: a notice
// costs microseconds, not a copy of the whole index, and is visible to the
// next Search as soon as Update returns.
type Index struct {
	src Source
	// log reports summaries that cannot be read and failed resyncs.
	log  *slog.Logger
	snap atomic.Pointer[snapshot]
	// memos are rendered answers by query (see Answer).
	memos     sync.Map
	memoCount atomic.Int64
	// loaded is set by the first successful Load; loads counts them (a
	// test waits on it for a resync instead of sleeping).
	loaded atomic.Bool
	loads  atomic.Int64
	// blockSize is defaultBlockSize (tests make it small).
	blockSize int

	// loadMu lets one Load read at a time.
	loadMu sync.Mutex
	// reload asks Run for a full Load now (RequestReload); requests made
	// while one is pending are one request.
	reload chan struct{}
	// pending holds the ids of change notices not yet re-read (Enqueue);
	// kick wakes RunUpdates.
	pendingMu sync.Mutex
	pending   map[string]struct{}
	kick      chan struct{}
	// mu serializes writers: every Update (its read included, so that two
	// Updates of one id install in the order they read) and the install
	// step of a Load.
	mu sync.Mutex
	// vol is the volume of every id in the current snapshot: with the id, it
	// locates the id's entry in the sorted snapshot by binary search.
	vol map[string]float64
	// dirty collects the ids that Updates changed while a Load was reading
	// (nil when none is). The Load's copy of them may be older than the
	// Update's, so it keeps the Update's.
	dirty map[string]struct{}
}

// New returns an empty index on src that reports to log (nil: the default
// logger); Load (or Run) fills it.
func New(src Source, log *slog.Logger) *Index {
	if log == nil {
		log = slog.Default()
	}
	x := &Index{src: src, log: log, vol: map[string]float64{}, blockSize: defaultBlockSize,
		reload: make(chan struct{}, 1), pending: map[string]struct{}{}, kick: make(chan struct{}, 1)}
	x.snap.Store(&snapshot{})
	return x
}

// Ready reports whether the index has loaded at least once (for /readyz).
func (x *Index) Ready() bool { return x.loaded.Load() }

// Loads is how many full Loads have completed (a test waits on it for a
// resync instead of sleeping through its period).
func (x *Index) Loads() int64 { return x.loads.Load() }

// Len is the number of events the index holds.
func (x *Index) Len() int { return x.snap.Load().n }

// parseSummary reads a cached summary; false when it cannot be read or names
// another event than its key (cache never writes either).
func (x *Index) parseSummary(id string, raw []byte) (item, bool) {
	var s struct {
		UniversalID string  `json:"universal_id"`
		Title       string  `json:"title"`
		Volume      float64 `json:"volume"`
		linkFields
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.UniversalID != id {
		x.log.Warn("search: summary skipped", "event_id", id, "err", err)
		return item{}, false
	}
	lower := strings.ReplaceAll(strings.ToLower(s.Title), string(sep), "\uFFFD")
	return item{entry{id: id, volume: s.Volume, raw: raw, links: s.links()}, lower}, true
}

// Load replaces the index with every summary in the cache.
func (x *Index) Load(ctx context.Context) error {
	x.loadMu.Lock()
	defer x.loadMu.Unlock()
	x.mu.Lock()
	x.dirty = map[string]struct{}{}
	x.mu.Unlock()

	all, err := x.src.Summaries(ctx)
	if err != nil {
		x.mu.Lock()
		x.dirty = nil
		x.mu.Unlock()
		return fmt.Errorf("search: load: %w", err)
	}
	// Parse, sort and lay out outside mu: Updates go on meanwhile.
	items := make([]item, 0, len(all))
	vol := make(map[string]float64, len(all))
	for id, raw := range all {
		if it, ok := x.parseSummary(id, raw); ok {
			items = append(items, it)
			vol[id] = it.volume
		}
	}
	slices.SortFunc(items, compareItems)
	loaded := &snapshot{n: len(items)}
	for chunk := range slices.Chunk(items, x.blockSize) {
		loaded.blocks = append(loaded.blocks, newBlock(chunk, nil))
	}

	x.mu.Lock()
	defer x.mu.Unlock()
	// Ids updated during the read keep the state the Updates left: the
	// current entry, or none when they left the listing.
	cur := x.snap.Load()
	changes := make(map[string]*item, len(x.dirty))
	for id := range x.dirty {
		changes[id] = nil
		if v, ok := x.vol[id]; ok {
			changes[id] = cur.find(id, v)
		}
	}
	x.dirty = nil
	x.vol = vol
	x.snap.Store(loaded.merge(vol, changes, x.blockSize))
	x.loaded.Store(true)
	x.loads.Add(1)
	return nil
}

// Update re-reads ids (those a change notice names): an id with a summary is
// inserted or replaced, an id without is removed (it left the listing).
func (x *Index) Update(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	got, err := x.src.SummariesOf(ctx, ids)
	if err != nil {
		return fmt.Errorf("search: update %d events: %w", len(ids), err)
	}
	changes := make(map[string]*item, len(ids))
	for _, id := range ids {
		changes[id] = nil
		if raw, ok := got[id]; ok {
			if it, ok := x.parseSummary(id, raw); ok {
				changes[id] = &it
			}
		}
		if x.dirty != nil {
			x.dirty[id] = struct{}{}
		}
	}
	x.snap.Store(x.snap.Load().merge(x.vol, changes, x.blockSize))
	return nil
}

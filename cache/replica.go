package cache

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/redisx"
)

// replica is the node's copy of every price item Redis holds, kept in place
// by the change notices, which carry the items their writers wrote
// (notice.Change.Prices): the snapshot route and the streams read it with
// no round trip. It is loaded from Redis when the node starts and again
// whenever notices may have been missed (a lost change number, a flush, a
// NATS reconnect), and answers only while it is whole (ready): otherwise
// reads take the Reader's other layers (memory, Redis, the store).
//
// An item is replaced only by a higher revision (Rev), so notices and the
// load may arrive in any order. A notice that names a market without
// carrying its item (a writer that does not carry them) removes the item:
// reads of it go to Redis until refresh brings it back.
type replica struct {
	seed   maphash.Seed
	shards [replicaShards]replicaShard
	// ready: the replica is whole and follows the notices.
	ready atomic.Bool
	// epoch moves whenever the replica stops being whole (invalidate): a
	// load that began before it does not make the replica ready. stateMu
	// orders the two.
	stateMu sync.Mutex
	epoch   uint64
	items   atomic.Int64
	bytes   atomic.Int64
	// touched sinks getMany's warming loads (never counts anything).
	touched atomic.Uint64

	// late holds change numbers given up as lost (their gap outlasted the
	// notice wait) whose notices may still come: a writer slowed by an
	// overloaded Redis, not a dead one. Each waits until its deadline; a
	// notice that comes takes its number out; one still missing then
	// reloads the replica. Meanwhile a read at a position at or above the
	// lowest of them goes to Redis (the replica may lack that write).
	lateMu  sync.Mutex
	late    map[int64]time.Time
	lateMin atomic.Int64 // lowest number in late; 0 when none
}

// replicaShards spreads the replica's locks: a notice of many markets and
// the reads of many requests rarely meet on one.
const (
	replicaShardBits = 6
	replicaShards    = 1 << replicaShardBits
)

// replicaShard's lock orders its writers; readers take none
// (replicaStore).
type replicaShard struct {
	mu sync.Mutex
	st *replicaStore
}

// replicaItem is one market's price item as Redis holds it.
type replicaItem struct {
	rev, seq int64
	served   bool
	body     []byte
	// sum is xxhash of body, as the store keeps it (set by itemAt; a put
	// computes its own).
	sum uint64
}

// replicaItemOverhead approximates what an item costs besides its id and
// body (its index entry): for the bytes gauge only.
const replicaItemOverhead = 48

func newReplica() *replica {
	rp := &replica{seed: maphash.MakeSeed(), late: map[int64]time.Time{}}
	for i := range rp.shards {
		rp.shards[i].st = newReplicaStore()
	}
	return rp
}

// shard returns id's shard and hash.
func (rp *replica) shard(id string) (*replicaShard, uint64) {
	h := maphash.String(rp.seed, id)
	return &rp.shards[h%replicaShards], h
}

// get returns the item of id, if the replica holds one. Its body is
// shared: read it, never change it. It takes no lock.
func (rp *replica) get(id string) (replicaItem, bool) {
	s, h := rp.shard(id)
	return s.st.get(h, id)
}

// getMany looks ids up as get does and calls found for each one held, in
// order. A snapshot's ids are spread over a replica far bigger than the
// CPU's caches, and a lookup is two dependent misses (the table entry,
// then the item): one id after another, the CPU waits for each in turn.
// So two passes first touch every id's entry, then every item those
// entries name, loads that depend on nothing before them in their pass
// and that the CPU keeps in flight together; the lookups then find their
// lines in cache.
func (rp *replica) getMany(ids []string, found func(i int, it replicaItem)) {
	var hs [64]uint64
	for from := 0; from < len(ids); from += len(hs) {
		part := ids[from:min(from+len(hs), len(ids))]
		for i, id := range part {
			hs[i] = maphash.String(rp.seed, id)
		}
		var touched uint64
		for i := range part {
			st := rp.shards[hs[i]%replicaShards].st.state.Load()
			touched += atomic.LoadUint64(&st.table[home(hs[i], len(st.table)-1)])
		}
		for i := range part {
			st := rp.shards[hs[i]%replicaShards].st.state.Load()
			e := atomic.LoadUint64(&st.table[home(hs[i], len(st.table)-1)])
			if e&entryHeld != 0 {
				if b := st.at(e); len(b) > 0 {
					touched += uint64(b[0])
				}
			}
		}
		if touched == math.MaxUint64 { // never: keeps the passes' loads from being dropped
			rp.touched.Add(1)
		}
		for i, id := range part {
			if it, ok := rp.shards[hs[i]%replicaShards].st.get(hs[i], id); ok {
				found(from+i, it)
			}
		}
	}
}

// put stores it for id unless the replica holds the same or a higher
// revision, and reports whether it stored it.
func (rp *replica) put(id string, it replicaItem) bool {
	s, h := rp.shard(id)
	s.mu.Lock()
	cur, ok := s.st.get(h, id)
	if ok && cur.rev >= it.rev {
		s.mu.Unlock()
		return false
	}
	s.st.put(h, id, it)
	s.mu.Unlock()
	if ok {
		rp.bytes.Add(int64(len(it.body) - len(cur.body)))
	} else {
		rp.items.Add(1)
		rp.bytes.Add(int64(replicaItemOverhead + len(id) + len(it.body)))
	}
	return true
}

// remove drops the items of ids.
func (rp *replica) remove(ids []string) {
	for _, id := range ids {
		s, h := rp.shard(id)
		s.mu.Lock()
		cur, ok := s.st.remove(h, id)
		s.mu.Unlock()
		if ok {
			rp.items.Add(-1)
			rp.bytes.Add(-int64(replicaItemOverhead + len(id) + len(cur.body)))
		}
	}
}

// clear drops every item.
func (rp *replica) clear() {
	for i := range rp.shards {
		s := &rp.shards[i]
		s.mu.Lock()
		s.st.reset()
		s.mu.Unlock()
	}
	rp.items.Store(0)
	rp.bytes.Store(0)
}

// invalidate says the replica may have missed notices: it stops answering
// until a load makes it whole again.
func (rp *replica) invalidate() {
	rp.stateMu.Lock()
	rp.epoch++
	rp.ready.Store(false)
	rp.stateMu.Unlock()
}

// begin returns the epoch a load starts in.
func (rp *replica) begin() uint64 {
	rp.stateMu.Lock()
	defer rp.stateMu.Unlock()
	return rp.epoch
}

// finish makes the replica ready if nothing invalidated it since the load
// that began in epoch, and reports whether it did.
func (rp *replica) finish(epoch uint64) bool {
	rp.stateMu.Lock()
	defer rp.stateMu.Unlock()
	if rp.epoch != epoch {
		return false
	}
	rp.ready.Store(true)
	return true
}

// apply takes a change notice's items (after the notice's number was taken
// and before it is recorded as applied: see Reader.Notice). It returns the
// markets the notice names without their items, which it removed: the
// caller reads them again from Redis.
func (rp *replica) apply(n notice.Change) (missing []string) {
	for _, p := range n.Prices {
		rp.put(p.ID, replicaItem{rev: p.Rev, seq: n.Seq, served: p.Served, body: p.Body})
	}
	if len(n.Prices) == len(n.Markets) {
		return nil
	}
	carried := make(map[string]struct{}, len(n.Prices))
	for _, p := range n.Prices {
		carried[p.ID] = struct{}{}
	}
	for _, id := range n.Markets {
		if _, ok := carried[id]; !ok {
			missing = append(missing, id)
		}
	}
	rp.remove(missing)
	return missing
}

// expectLate records numbers given up as lost, each to wait until deadline.
func (rp *replica) expectLate(seqs []int64, deadline time.Time) {
	rp.lateMu.Lock()
	defer rp.lateMu.Unlock()
	for _, s := range seqs {
		rp.late[s] = deadline
	}
	rp.setLateMin()
}

// arrivedLate takes seq out of the late numbers, if it is one.
func (rp *replica) arrivedLate(seq int64) {
	if seq <= 0 || rp.lateMin.Load() == 0 {
		return
	}
	rp.lateMu.Lock()
	defer rp.lateMu.Unlock()
	if _, ok := rp.late[seq]; ok {
		delete(rp.late, seq)
		rp.setLateMin()
	}
}

// overdue reports whether a late number passed its deadline at now (and
// forgets them all then: the replica reloads).
func (rp *replica) overdue(now time.Time) bool {
	if rp.lateMin.Load() == 0 {
		return false
	}
	rp.lateMu.Lock()
	defer rp.lateMu.Unlock()
	for _, d := range rp.late {
		if now.After(d) {
			clear(rp.late)
			rp.setLateMin()
			return true
		}
	}
	return false
}

// setLateMin keeps lateMin. lateMu is held.
func (rp *replica) setLateMin() {
	var lo int64
	for s := range rp.late {
		if lo == 0 || s < lo {
			lo = s
		}
	}
	rp.lateMin.Store(lo)
}

// replicaLoadBatch is how many items one pipeline of a load reads.
const replicaLoadBatch = 1000

// load reads every price item Redis holds into the replica (merged by
// revision with what notices bring meanwhile) and returns how many.
func (c *Cache) loadReplica(ctx context.Context, rp *replica) (int, error) {
	prefix := c.prefix + "{m:"
	var ids []string
	err := redisx.ScanKeys(ctx, c.rdb, redisx.EscapeGlob(prefix)+"*", func(key string) error {
		// P{m:<id>} is a price item; P{m:<id>}:t a trade list.
		if strings.HasSuffix(key, "}") && strings.HasPrefix(key, prefix) {
			ids = append(ids, key[len(prefix):len(key)-1])
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cache: list price items: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for start := 0; start < len(ids); start += replicaLoadBatch {
		chunk := ids[start:min(start+replicaLoadBatch, len(ids))]
		g.Go(func() error {
			p := c.rdb.Pipeline()
			cmds := make([]*redis.SliceCmd, len(chunk))
			for i, id := range chunk {
				cmds[i] = c.QueueMarket(p, id)
			}
			if _, err := p.Exec(gctx); err != nil {
				return fmt.Errorf("cache: read price items: %w", err)
			}
			for i, cmd := range cmds {
				vals, err := cmd.Result()
				if err != nil || len(vals) != 4 {
					return fmt.Errorf("cache: read price item %s: %w", chunk[i], err)
				}
				m := marketEntry(vals)
				if !m.Found {
					continue // gone since the scan
				}
				rp.put(chunk[i], replicaItem{rev: m.Rev, seq: m.Seq, served: m.Served, body: m.Body})
			}
			return nil
		})
	}
	return len(ids), g.Wait()
}

// replicaRetry spaces failed loads of the replica.
const replicaRetry = 500 * time.Millisecond

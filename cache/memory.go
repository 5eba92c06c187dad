package cache

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// epochs is node memory's one invalidation idea, shared by every resource
// the node holds: an epoch that every invalidation bumps. A read takes the
// epoch before it goes to Redis and stores its answer only if the epoch has
// not moved since, so an answer read before a change notice dropped its id
// never outlives the drop.
type epochs struct {
	// mu orders stores against invalidations: a store holds it shared while
	// it compares the epoch and writes, an invalidation exclusively while it
	// bumps the epoch and deletes. A store therefore either lands before the
	// delete (which removes it) or sees the new epoch (and stores nothing).
	mu    sync.RWMutex
	epoch atomic.Uint64
}

// now is the epoch a read must store with.
func (g *epochs) now() uint64 { return g.epoch.Load() }

// memory is one resource's share of node memory: values by key, bounded in
// bytes (weight) and kept at most a TTL after they were stored, on otter's
// eviction. All memories of a Reader share one epochs.
type memory[K comparable, V any] struct {
	g        *epochs
	c        *otter.Cache[K, V]
	weigh    func(K, V) uint32
	maxBytes int
}

// memoryConfig shapes one memory.
type memoryConfig[K comparable, V any] struct {
	// maxBytes bounds the summed weight; a value heavier than a quarter of
	// it is not stored (it would evict everything else).
	maxBytes int
	// weigh is a value's weight in bytes, its key's included.
	weigh func(K, V) uint32
	ttl   time.Duration
	// clock is otter's time source; nil for the real clock (tests move it).
	clock otter.Clock
}

func newMemory[K comparable, V any](g *epochs, cfg memoryConfig[K, V]) *memory[K, V] {
	return &memory[K, V]{g: g, weigh: cfg.weigh, maxBytes: cfg.maxBytes, c: otter.Must(&otter.Options[K, V]{
		MaximumWeight:    uint64(cfg.maxBytes),
		Weigher:          cfg.weigh,
		ExpiryCalculator: otter.ExpiryWriting[K, V](cfg.ttl),
		Clock:            cfg.clock,
	})}
}

// get returns what the node holds for k, if it holds it within its TTL.
func (m *memory[K, V]) get(k K) (V, bool) { return m.c.GetIfPresent(k) }

// put stores v for k unless the epoch moved since the read of v began
// (epoch is what epochs.now returned then); it reports whether it stored.
func (m *memory[K, V]) put(k K, v V, epoch uint64) bool {
	m.g.mu.RLock()
	defer m.g.mu.RUnlock()
	if m.g.epoch.Load() != epoch {
		return false
	}
	if 4*int(m.weigh(k, v)) > m.maxBytes {
		return false
	}
	m.c.Set(k, v)
	return true
}

// drop forgets the values of keys.
func (m *memory[K, V]) drop(keys ...K) {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	m.g.epoch.Add(1)
	for _, k := range keys {
		m.c.Invalidate(k)
	}
}

// dropIf forgets every value whose key and value match.
func (m *memory[K, V]) dropIf(match func(K, V) bool) {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	m.g.epoch.Add(1)
	for k, v := range m.c.All() {
		if match(k, v) {
			m.c.Invalidate(k)
		}
	}
}

// flush forgets everything.
func (m *memory[K, V]) flush() {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	m.g.epoch.Add(1)
	m.c.InvalidateAll()
}

// close stops otter's background clean-up.
func (m *memory[K, V]) close() { m.c.StopAllGoroutines() }

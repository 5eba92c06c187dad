package cache

// replicaStore is one shard's items, laid out so that the garbage
// collector has next to nothing to scan: 250,000 items as maps of strings
// and byte slices are half a million objects and pointers that every GC
// cycle marks, and on a busy node that marking was a sixth of its CPU. Here
// the index maps an id's 64-bit hash to a slot of plain numbers, and the
// ids and bodies live back to back in large chunks of bytes, which the GC
// sees as a handful of pointer-free objects.
//
// Chunks are only appended to: a replaced item's bytes stay where they are
// (a reader may still hold its body) and count as dead until a compaction
// copies the live items into new chunks and lets the old ones go. Bodies
// handed out are sub-slices of a chunk capped at their length; nothing
// ever writes over them.
type replicaStore struct {
	index map[uint64]replicaSlot
	// other holds the items whose id hashes like another held id's (a
	// 64-bit collision: practically never, but then still correct).
	other  map[string]replicaItem
	chunks [][]byte
	// live and dead are the bytes of held items and of replaced ones.
	live, dead int
}

// replicaSlot is where an item is and what it is, with no pointer.
type replicaSlot struct {
	gen, seq int64
	chunk    uint32
	off      uint32
	bodyLen  uint32
	idLen    uint16
	served   bool
	// noBody: the item had a nil body (a market with no price yet), which
	// readers tell from an empty one (PriceItem.Shown).
	noBody bool
}

// replicaChunk is the size of the chunks items are appended to; an item
// bigger than that gets a chunk of its own.
const replicaChunk = 128 << 10

func newReplicaStore() replicaStore {
	return replicaStore{index: map[uint64]replicaSlot{}, other: map[string]replicaItem{}}
}

// idOf is the id a slot holds.
func (s *replicaStore) idOf(sl replicaSlot) []byte {
	c := s.chunks[sl.chunk]
	return c[sl.off : sl.off+uint32(sl.idLen)]
}

// item is what a slot holds.
func (s *replicaStore) item(sl replicaSlot) replicaItem {
	c := s.chunks[sl.chunk]
	it := replicaItem{gen: sl.gen, seq: sl.seq, served: sl.served}
	if !sl.noBody {
		from := sl.off + uint32(sl.idLen)
		to := from + sl.bodyLen
		it.body = c[from:to:to]
	}
	return it
}

// get returns the item of id, whose hash is h.
func (s *replicaStore) get(h uint64, id string) (replicaItem, bool) {
	if sl, ok := s.index[h]; ok {
		if string(s.idOf(sl)) == id {
			return s.item(sl), true
		}
	}
	if len(s.other) == 0 {
		return replicaItem{}, false
	}
	it, ok := s.other[id]
	return it, ok
}

// put stores it for id (hash h), replacing what it held, which it returns.
func (s *replicaStore) put(h uint64, id string, it replicaItem) (old replicaItem, had bool) {
	sl, ok := s.index[h]
	if ok && string(s.idOf(sl)) != id {
		// Another id has this hash: this one lives in other.
		old, had = s.other[id]
		o := replicaItem{gen: it.gen, seq: it.seq, served: it.served}
		if it.body != nil {
			o.body = append([]byte{}, it.body...)
		}
		s.other[id] = o
		return old, had
	}
	if ok {
		old, had = s.item(sl), true
		s.dead += int(sl.idLen) + int(sl.bodyLen)
		s.live -= int(sl.idLen) + int(sl.bodyLen)
	} else if o, in := s.other[id]; in {
		// It lived in other while an id of its hash held the slot.
		old, had = o, true
		delete(s.other, id)
	}
	s.index[h] = s.write(id, it)
	s.maybeCompact()
	return old, had
}

// write appends id and it's body to the chunks and returns their slot.
func (s *replicaStore) write(id string, it replicaItem) replicaSlot {
	n := len(id) + len(it.body)
	last := len(s.chunks) - 1
	if last < 0 || cap(s.chunks[last])-len(s.chunks[last]) < n {
		s.chunks = append(s.chunks, make([]byte, 0, max(replicaChunk, n)))
		last++
	}
	c := s.chunks[last]
	off := len(c)
	c = append(c, id...)
	c = append(c, it.body...)
	s.chunks[last] = c
	s.live += n
	return replicaSlot{gen: it.gen, seq: it.seq, served: it.served, chunk: uint32(last), off: uint32(off),
		idLen: uint16(len(id)), bodyLen: uint32(len(it.body)), noBody: it.body == nil}
}

// remove drops the item of id (hash h) and returns it.
func (s *replicaStore) remove(h uint64, id string) (replicaItem, bool) {
	if sl, ok := s.index[h]; ok && string(s.idOf(sl)) == id {
		it := s.item(sl)
		delete(s.index, h)
		s.dead += int(sl.idLen) + int(sl.bodyLen)
		s.live -= int(sl.idLen) + int(sl.bodyLen)
		s.maybeCompact()
		return it, true
	}
	it, ok := s.other[id]
	delete(s.other, id)
	return it, ok
}

// maybeCompact copies the live items into new chunks once the dead bytes
// reach a quarter of them (and a chunk's worth): the old chunks go to the
// GC when the last reader of a body in them is done. A shard of 250,000
// markets / 64 holds about 1.5 MB; at 5,000 updates a second it compacts
// about every 12 s, a copy of 1.5 MB, and holds at most a quarter more
// than its live bytes.
func (s *replicaStore) maybeCompact() {
	if s.dead < replicaChunk || s.dead < s.live/4 {
		return
	}
	old := *s
	s.chunks, s.live, s.dead = nil, 0, 0
	for h, sl := range old.index {
		it := old.item(sl)
		s.index[h] = s.write(string(old.idOf(sl)), it)
	}
}

// count is how many items the store holds.
func (s *replicaStore) count() int { return len(s.index) + len(s.other) }

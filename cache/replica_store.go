package cache

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// replicaStore is one shard's items, laid out for what a busy node pays
// for: the garbage collector's marking, cache misses, and locks.
//
//   - No pointers: 250,000 items as maps of strings and byte slices are half
//     a million objects that every GC cycle marks (on a busy node a sixth of
//     its CPU). Here an item is a run of bytes in a large chunk, a header
//     then its id then its body, and the index is a slice of plain numbers.
//   - Two cache misses a lookup: a snapshot of 50 ids reads 50 items spread
//     over a replica far bigger than the CPU's caches. The index is one
//     open-addressing table of 8-byte entries (an entry holds a tag of the
//     id's hash and where its item is), so a lookup touches one line of it,
//     then the item, whose header, id and body are contiguous. A Go map
//     with the item's fields in its values touched three or four lines.
//   - No lock to read: a read lock is an atomic read-modify-write, which on
//     x86 is a full fence, so a request's 50 lookups waited for their misses
//     one after the other. Readers load the table and the chunks from one
//     atomic pointer (state) and each entry with an atomic load, plain moves
//     that let the CPU overlap the misses of consecutive lookups. Writers
//     (put, remove, reset) hold the shard's lock, as before.
//
// What makes lock-free reads correct:
//
//   - Bytes in a chunk are written once, before the entry that names them
//     is stored (atomically); a reader that loads the entry sees them.
//     Nothing ever writes over them: a replaced item's bytes stay and count
//     as dead until a compaction copies the live items into new chunks.
//   - The table and the chunk list a reader loaded stay consistent: a new
//     chunk is published in a new state before any entry names it (a reader
//     whose state is older sees a chunk number past its list and starts
//     over with the current state), and a rehash or compaction builds a new
//     table (and chunks) aside and publishes them together; the old ones are
//     never written again, and go to the GC with their last reader.
//
// Ids whose hashes are equal (or share a tag) are told apart by the id in
// the item: a lookup probes on past an entry whose id differs.
type replicaStore struct {
	state atomic.Pointer[replicaState]
	// The writer's own figures, under the shard's lock: n items held,
	// used table entries that are not empty (removed ones too), fill the
	// bytes used of the last chunk, live and dead the bytes of held items
	// and of replaced ones.
	n, used, fill int
	live, dead    int
}

// replicaState is what readers load: a power-of-two table probed linearly
// from hash&mask, whose entries are 0 (empty), entryGone (removed) or
// entryTag|chunk|off, read and written atomically; and the chunks, each at
// its full length.
type replicaState struct {
	table  []uint64
	chunks [][]byte
}

// An item in a chunk: its header, then its id, then its body.
const (
	hdrHash    = 0  // uint64: the id's hash, to rebuild the table
	hdrRev     = 8  // int64
	hdrSeq     = 16 // int64
	hdrBodyLen = 24 // uint32
	hdrIDLen   = 28 // uint16
	hdrFlags   = 30 // flagServed | flagNoBody
	hdrSum     = 31 // uint64: xxhash of the body (0 without one): the snapshot's ETag combines them
	hdrSize    = 39

	flagServed = 1
	// flagNoBody: the item had a nil body (a market with no price yet),
	// which readers tell from an empty one (PriceItem.Shown).
	flagNoBody = 2
)

// Table entries: the top bit is set on every held entry, the next 23 bits
// are the hash's top bits, then the chunk (23 bits) and the offset in it
// (17 bits: chunks are at most replicaChunk, and an item bigger than that
// has a chunk of its own at offset 0).
const (
	entryGone    = 1
	entryHeld    = 1 << 63
	entryTagMask = 0x7fffff << 40
	entryOffBits = 17
	entryRefMask = 1<<40 - 1
	// replicaMaxChunks is what the entry can name.
	replicaMaxChunks = 1 << 23
)

// replicaChunk is the size of the chunks items are appended to; an item
// bigger than that gets a chunk of its own.
const replicaChunk = 128 << 10

// replicaMinTable is the smallest table.
const replicaMinTable = 64

func newReplicaStore() *replicaStore {
	s := &replicaStore{}
	s.reset()
	return s
}

// reset empties the store (under the shard's lock).
func (s *replicaStore) reset() {
	s.state.Store(&replicaState{table: make([]uint64, replicaMinTable)})
	s.n, s.used, s.fill, s.live, s.dead = 0, 0, 0, 0, 0
}

func entryTag(h uint64) uint64 { return entryHeld | (h>>41)<<40&entryTagMask }

func entryChunk(e uint64) int { return int(e & entryRefMask >> entryOffBits) }

// at returns the item an entry names, its bytes from the header on; nil
// when the entry names a chunk st does not hold (st is older than it).
func (st *replicaState) at(e uint64) []byte {
	k := entryChunk(e)
	if k >= len(st.chunks) {
		return nil
	}
	return st.chunks[k][e&(1<<entryOffBits-1):]
}

// idAt is the id of the item b starts.
func idAt(b []byte) []byte {
	return b[hdrSize : hdrSize+int(binary.LittleEndian.Uint16(b[hdrIDLen:]))]
}

// itemAt decodes the item b starts; its body is capped at its length.
func itemAt(b []byte) replicaItem {
	flags := b[hdrFlags]
	it := replicaItem{
		rev:    int64(binary.LittleEndian.Uint64(b[hdrRev:])),
		seq:    int64(binary.LittleEndian.Uint64(b[hdrSeq:])),
		served: flags&flagServed != 0,
		sum:    binary.LittleEndian.Uint64(b[hdrSum:]),
	}
	if flags&flagNoBody == 0 {
		from := hdrSize + int(binary.LittleEndian.Uint16(b[hdrIDLen:]))
		to := from + int(binary.LittleEndian.Uint32(b[hdrBodyLen:]))
		it.body = b[from:to:to]
	}
	return it
}

// get returns the item of id, whose hash is h. It takes no lock.
func (s *replicaStore) get(h uint64, id string) (replicaItem, bool) {
	for {
		st := s.state.Load()
		b, ok := st.find(h, id)
		if ok {
			return itemAt(b), true
		}
		if b == nil {
			return replicaItem{}, false
		}
		// An entry named a chunk newer than st: look again in the
		// current state (the chunk was published before the entry).
	}
}

// find looks id up in st: the item's bytes and true, nil and false when st
// does not hold it, or a non-nil empty slice and false when an entry names
// a chunk newer than st.
func (st *replicaState) find(h uint64, id string) ([]byte, bool) {
	mask := len(st.table) - 1
	tag := entryTag(h)
	for i := home(h, mask); ; i = (i + 1) & mask {
		e := atomic.LoadUint64(&st.table[i])
		if e == 0 {
			return nil, false
		}
		if e&^entryRefMask != tag {
			continue
		}
		b := st.at(e)
		if b == nil {
			return []byte{}, false
		}
		if string(idAt(b)) == id {
			return b, true
		}
	}
}

// index returns the table index of id's entry in the current state, or -1
// (the writer's lookup: under the lock the state is current).
func (s *replicaStore) index(st *replicaState, h uint64, id string) int {
	mask := len(st.table) - 1
	tag := entryTag(h)
	for i := home(h, mask); ; i = (i + 1) & mask {
		e := st.table[i]
		if e == 0 {
			return -1
		}
		if e&^entryRefMask == tag && string(idAt(st.at(e))) == id {
			return i
		}
	}
}

// put stores it for id (hash h), replacing what it held, which it returns
// (under the shard's lock).
func (s *replicaStore) put(h uint64, id string, it replicaItem) (old replicaItem, had bool) {
	st := s.state.Load()
	if i := s.index(st, h, id); i >= 0 {
		old, had = itemAt(st.at(st.table[i])), true
		n := itemSize(len(id), len(old.body))
		s.dead += n
		s.live -= n
		e, st := s.write(st, true, h, id, it)
		atomic.StoreUint64(&st.table[i], e)
		s.maybeCompact()
		return old, had
	}
	if (s.used+1)*2 > len(st.table) {
		st = s.rehash(max(replicaMinTable, nextPow2((s.n+1)*2)))
	}
	e, st := s.write(st, true, h, id, it)
	if insert(st.table, h, e, true) {
		s.used++
	}
	s.n++
	s.maybeCompact()
	return old, had
}

// insert puts entry e in the first free place of h's probe in table (an
// empty one, or a removed one when the table is published: no reader needs
// a removed entry), atomically when the table is published, and reports
// whether it took an empty one.
func insert(table []uint64, h, e uint64, published bool) (took bool) {
	mask := len(table) - 1
	i := home(h, mask)
	for table[i] != 0 && table[i] != entryGone {
		i = (i + 1) & mask
	}
	took = table[i] == 0
	if published {
		atomic.StoreUint64(&table[i], e)
	} else {
		table[i] = e
	}
	return took
}

// home is where h's probe starts in a table of mask+1 entries: above the
// bits that chose the shard (every id of a shard has the same low bits of
// its hash), below the tag's.
func home(h uint64, mask int) int { return int(h>>replicaShardBits) & mask }

// rehash publishes a table of size entries built from the held ones,
// leaving out the removed, and returns the new state.
func (s *replicaStore) rehash(size int) *replicaState {
	st := s.state.Load()
	table := make([]uint64, size)
	s.used = 0
	for _, e := range st.table {
		if e&entryHeld != 0 {
			insert(table, binary.LittleEndian.Uint64(st.at(e)[hdrHash:]), e, false)
			s.used++
		}
	}
	st = &replicaState{table: table, chunks: st.chunks}
	s.state.Store(st)
	return st
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

func itemSize(idLen, bodyLen int) int { return hdrSize + idLen + bodyLen }

// write appends id's item to st's chunks and returns its table entry and
// the state that holds its chunk. When st is published (publish), a new
// chunk is published in a new state before the bytes are written into it;
// a state being built aside gets it in place.
func (s *replicaStore) write(st *replicaState, publish bool, h uint64, id string, it replicaItem) (uint64, *replicaState) {
	n := itemSize(len(id), len(it.body))
	last := len(st.chunks) - 1
	if last < 0 || len(st.chunks[last])-s.fill < n {
		if len(st.chunks) >= replicaMaxChunks {
			panic("cache: a replica shard outgrew its chunk numbers")
		}
		chunk := make([]byte, max(replicaChunk, n))
		if publish {
			st = &replicaState{table: st.table, chunks: append(st.chunks[:len(st.chunks):len(st.chunks)], chunk)}
			s.state.Store(st)
		} else {
			st.chunks = append(st.chunks, chunk)
		}
		last++
		s.fill = 0
	}
	off := s.fill
	b := st.chunks[last][off : off+n]
	binary.LittleEndian.PutUint64(b[hdrHash:], h)
	binary.LittleEndian.PutUint64(b[hdrRev:], uint64(it.rev))
	binary.LittleEndian.PutUint64(b[hdrSeq:], uint64(it.seq))
	binary.LittleEndian.PutUint32(b[hdrBodyLen:], uint32(len(it.body)))
	binary.LittleEndian.PutUint16(b[hdrIDLen:], uint16(len(id)))
	var flags byte
	if it.served {
		flags |= flagServed
	}
	if it.body == nil {
		flags |= flagNoBody
	}
	b[hdrFlags] = flags
	var sum uint64
	if it.body != nil {
		sum = xxhash.Sum64(it.body)
	}
	binary.LittleEndian.PutUint64(b[hdrSum:], sum)
	copy(b[hdrSize:], id)
	copy(b[hdrSize+len(id):], it.body)
	s.fill += n
	s.live += n
	return entryTag(h) | uint64(last)<<entryOffBits | uint64(off), st
}

// remove drops the item of id (hash h) and returns it (under the shard's
// lock).
func (s *replicaStore) remove(h uint64, id string) (replicaItem, bool) {
	st := s.state.Load()
	i := s.index(st, h, id)
	if i < 0 {
		return replicaItem{}, false
	}
	it := itemAt(st.at(st.table[i]))
	atomic.StoreUint64(&st.table[i], entryGone)
	s.n--
	n := itemSize(len(id), len(it.body))
	s.dead += n
	s.live -= n
	s.maybeCompact()
	return it, true
}

// maybeCompact copies the live items into new chunks once the dead bytes
// reach a quarter of them (and a chunk's worth), with a table without the
// removed entries, and publishes both: the old chunks go to the GC when the
// last reader of a body in them is done. A shard of 250,000 markets / 64
// holds about 1.5 MB; at 5,000 updates a second it compacts about every
// 12 s, a copy of 1.5 MB, and holds at most a quarter more than its live
// bytes.
func (s *replicaStore) maybeCompact() {
	if s.dead < replicaChunk || s.dead < s.live/4 {
		return
	}
	old := s.state.Load()
	next := &replicaState{table: make([]uint64, max(replicaMinTable, nextPow2(s.n*2)))}
	s.fill, s.live, s.dead, s.used = 0, 0, 0, 0
	for _, e := range old.table {
		if e&entryHeld == 0 {
			continue
		}
		b := old.at(e)
		h := binary.LittleEndian.Uint64(b[hdrHash:])
		e, _ := s.write(next, false, h, string(idAt(b)), itemAt(b))
		insert(next.table, h, e, false)
		s.used++
	}
	s.state.Store(next)
}

// count is how many items the store holds.
func (s *replicaStore) count() int { return s.n }

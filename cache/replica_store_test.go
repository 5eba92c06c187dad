package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// TestReplicaStoreModel runs random puts and removes on a store and on a
// map, with hashes squeezed into a small space so that ids collide, and
// bodies big and small so that chunks fill and compactions run: the store
// answers as the map does, and a body handed out before any later write is
// never changed by it.
func TestReplicaStoreModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	st := newReplicaStore()
	model := map[string]replicaItem{}
	hash := func(id string) uint64 { return uint64(len(id)*31+int(id[len(id)-1])) % 40 } // collisions on purpose
	type handed struct {
		body, want []byte
	}
	var out []handed
	compactions := 0
	for i := range 20000 {
		id := fmt.Sprintf("m%d", rng.IntN(300))
		h := hash(id)
		switch op := rng.IntN(10); {
		case op < 6:
			n := rng.IntN(400)
			if rng.IntN(200) == 0 {
				n = replicaChunk + rng.IntN(1000) // bigger than a chunk
			}
			body := bytes.Repeat([]byte{byte(i)}, n)
			switch rng.IntN(20) {
			case 0:
				body = nil // a market with no price: readers tell nil from empty
			case 1:
				body = []byte{}
			}
			it := replicaItem{rev: int64(i), seq: int64(i), served: i%2 == 0, body: body}
			chunks := len(st.state.Load().chunks)
			st.put(h, id, it)
			if len(st.state.Load().chunks) < chunks {
				compactions++
			}
			model[id] = it
		case op < 8:
			_, ok := st.remove(h, id)
			_, want := model[id]
			if ok != want {
				t.Fatalf("step %d: remove %s: %v, want %v", i, id, ok, want)
			}
			delete(model, id)
		default:
			got, ok := st.get(h, id)
			want, wok := model[id]
			if ok != wok || ok && (got.rev != want.rev || got.seq != want.seq || got.served != want.served ||
				!bytes.Equal(got.body, want.body) || (got.body == nil) != (want.body == nil) ||
				got.sum != bodySum(want.body)) {
				t.Fatalf("step %d: get %s: %v %+v, want %v %+v", i, id, ok, got.rev, wok, want.rev)
			}
			if ok {
				out = append(out, handed{got.body, bytes.Clone(want.body)})
			}
		}
	}
	if st.count() != len(model) {
		t.Fatalf("count %d, want %d", st.count(), len(model))
	}
	for i, h := range out {
		if !bytes.Equal(h.body, h.want) {
			t.Fatalf("body %d handed out changed later", i)
		}
	}
	hashes := map[uint64]bool{}
	for id := range model {
		hashes[hash(id)] = true
	}
	colliding := len(model) - len(hashes)
	if compactions == 0 || colliding == 0 {
		t.Fatalf("the run made %d compactions and holds %d ids whose hash another holds: it tested neither", compactions, colliding)
	}
	t.Logf("%d items, %d sharing a hash, %d compactions, %d chunks, table %d", st.count(), colliding, compactions, len(st.state.Load().chunks), len(st.state.Load().table))
}

// BenchmarkReplicaSnapshot reads 50 random items of a replica the size of
// the poll benchmark's world (250,000 items of 350 bytes), as a snapshot
// does: one by one (get) and in one call (getMany). The lookups miss the
// CPU's caches as a busy node's do.
func BenchmarkReplicaSnapshot(b *testing.B) {
	rp := newReplica()
	const n = 250_000
	ids := make([]string, n)
	body := bytes.Repeat([]byte{'x'}, 350)
	for i := range ids {
		ids[i] = fmt.Sprintf("mkt-%07d", i)
		rp.put(ids[i], replicaItem{rev: 1, seq: 1, served: true, body: body})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	lists := make([][]string, 1024)
	for i := range lists {
		for range 50 {
			lists[i] = append(lists[i], ids[rng.IntN(n)])
		}
	}
	out := make([]byte, 0, 50*len(body))
	b.Run("get", func(b *testing.B) {
		for i := range b.N {
			out = out[:0]
			for _, id := range lists[i%len(lists)] {
				it, _ := rp.get(id)
				out = append(out, it.body...)
			}
			if len(out) != 50*len(body) {
				b.Fatal("missing items")
			}
		}
	})
	b.Run("getMany", func(b *testing.B) {
		for i := range b.N {
			out = out[:0]
			rp.getMany(lists[i%len(lists)], func(_ int, it replicaItem) { out = append(out, it.body...) })
			if len(out) != 50*len(body) {
				b.Fatal("missing items")
			}
		}
	})
}

// TestReplicaStoreReadsWhileWriting: readers that take no lock, running
// while a writer replaces, removes, re-adds, rehashes and compacts, always
// find an id that stays held, with its own body at a revision no older
// than one they saw before; ids that come and go are found whole or not at
// all. (Run it with -race as well: the reads and writes are atomic where
// they meet.)
func TestReplicaStoreReadsWhileWriting(t *testing.T) {
	var mu sync.Mutex // the shard's lock: writers only
	st := newReplicaStore()
	hash := func(id string) uint64 { return uint64(len(id)*7+int(id[len(id)-1])) % 64 } // collisions on purpose
	body := func(id string, rev int64) []byte {
		return append(fmt.Appendf(nil, "%s@%d:", id, rev), bytes.Repeat([]byte{'x'}, int(rev%500))...)
	}
	const stay, churn = 200, 100
	put := func(id string, rev int64) {
		mu.Lock()
		st.put(hash(id), id, replicaItem{rev: rev, seq: rev, body: body(id, rev)})
		mu.Unlock()
	}
	for i := range stay {
		put(fmt.Sprintf("s%d", i), 1)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(5, 6))
		for rev := int64(2); ; rev++ {
			select {
			case <-stop:
				return
			default:
			}
			put(fmt.Sprintf("s%d", rng.IntN(stay)), rev)
			id := fmt.Sprintf("c%d", rng.IntN(churn))
			if rng.IntN(2) == 0 {
				put(id, rev)
			} else {
				mu.Lock()
				st.remove(hash(id), id)
				mu.Unlock()
			}
		}
	})
	var reads atomic.Int64
	for r := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			seen := map[string]int64{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("s%d", rng.IntN(stay))
				if rng.IntN(3) == 0 {
					id = fmt.Sprintf("c%d", rng.IntN(churn))
				}
				it, ok := st.get(hash(id), id)
				reads.Add(1)
				if !ok {
					if id[0] == 's' {
						t.Errorf("%s, always held, was not found", id)
						return
					}
					continue
				}
				if !bytes.Equal(it.body, body(id, it.rev)) || it.seq != it.rev {
					t.Errorf("%s: revision %d with body %.40q", id, it.rev, it.body)
					return
				}
				if it.rev < seen[id] && id[0] == 's' {
					t.Errorf("%s: revision %d after %d", id, it.rev, seen[id])
					return
				}
				seen[id] = it.rev
			}
		})
	}
	time.Sleep(time.Second) // how long the readers race the writer
	close(stop)
	wg.Wait()
	t.Logf("%d reads", reads.Load())
}

// TestReplicaGetMany: getMany finds what get finds, in order, over more
// ids than one warming pass takes, with ids the replica lacks among them.
func TestReplicaGetMany(t *testing.T) {
	rp := newReplica()
	var ids []string
	for i := range 150 {
		id := fmt.Sprintf("m%d", i)
		ids = append(ids, id)
		if i%7 != 3 {
			rp.put(id, replicaItem{rev: int64(i), seq: int64(i), body: []byte(id)})
		}
	}
	var got []int
	rp.getMany(ids, func(i int, it replicaItem) {
		if string(it.body) != ids[i] || it.rev != int64(i) {
			t.Errorf("item %d: %q at %d, want %q", i, it.body, it.rev, ids[i])
		}
		got = append(got, i)
	})
	var want []int
	for i, id := range ids {
		if _, ok := rp.get(id); ok {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) || len(want) != 150-21 {
		t.Fatalf("getMany found %v, get %v", got, want)
	}
}

// bodySum is the sum the store keeps with an item: xxhash of its body, 0
// without one.
func bodySum(body []byte) uint64 {
	if body == nil {
		return 0
	}
	return xxhash.Sum64(body)
}

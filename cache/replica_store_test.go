package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
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
			it := replicaItem{gen: int64(i), seq: int64(i), served: i%2 == 0, body: body}
			chunks := len(st.chunks)
			st.put(h, id, it)
			if len(st.chunks) < chunks {
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
			if ok != wok || ok && (got.gen != want.gen || got.seq != want.seq || got.served != want.served ||
				!bytes.Equal(got.body, want.body) || (got.body == nil) != (want.body == nil)) {
				t.Fatalf("step %d: get %s: %v %+v, want %v %+v", i, id, ok, got.gen, wok, want.gen)
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
	if compactions == 0 || len(st.other) == 0 {
		t.Fatalf("the run made %d compactions and holds %d colliding ids: it tested neither", compactions, len(st.other))
	}
	t.Logf("%d items, %d colliding, %d compactions, %d chunks", st.count(), len(st.other), compactions, len(st.chunks))
}

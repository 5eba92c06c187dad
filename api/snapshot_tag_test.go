package api

import (
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/marketdata/marketdata/cache"
)

// The snapshot's ETag combines the items' body hashes (kept in the
// replica) instead of hashing the answer: the same answer has the same tag
// whether its items came with their hashes (the replica) or not (Redis,
// node memory, the store), so every node agrees; any change of the
// answer's bytes changes it; and it names the answer's position.
func TestSnapshotTag(t *testing.T) {
	ids := []string{"mk_1", "mk_2", "mk_3"}
	body := func(s string) []byte { return []byte(`{"market_id":"` + s + `"}`) }
	items := func(withSums bool, bodies ...[]byte) []cache.PriceItem {
		out := make([]cache.PriceItem, len(bodies))
		for i, b := range bodies {
			out[i] = cache.PriceItem{Found: true, Served: b != nil, Body: b, Rev: 1, Seq: int64(10 + i)}
			if withSums && b != nil {
				out[i].Sum = xxhash.Sum64(b)
			}
		}
		return out
	}
	tag := func(ids []string, it []cache.PriceItem) string { return string(appendSnapshotTag(nil, ids, it)) }

	base := tag(ids, items(true, body("a"), body("b"), nil))
	if got := tag(ids, items(false, body("a"), body("b"), nil)); got != base {
		t.Errorf("the same answer from items without their sums: %s, want %s", got, base)
	}
	if !strings.HasSuffix(base, `-12"`) || !strings.HasPrefix(base, `"`) {
		t.Errorf("tag %s: want \"<hash>-12\" (the highest Seq of the items)", base)
	}
	for name, other := range map[string]string{
		"a body changed":       tag(ids, items(true, body("a"), body("B"), nil)),
		"a price missing":      tag(ids, items(true, body("a"), nil, nil)),
		"a missing id changed": tag([]string{"mk_1", "mk_2", "mk_4"}, items(true, body("a"), body("b"), nil)),
		"two bodies swapped":   tag(ids, items(true, body("b"), body("a"), nil)),
	} {
		if other == base {
			t.Errorf("%s: the same tag %s", name, base)
		}
	}
	// An id is told from the next one: "mk_1" missing then "2" is not
	// "mk_12" missing.
	one := tag([]string{"mk_1", "x"}, []cache.PriceItem{{Found: true}, {Found: true}})
	two := tag([]string{"mk_1x"}, []cache.PriceItem{{Found: true}})
	if one == two {
		t.Errorf("two missing ids and their concatenation have the same tag %s", one)
	}
}

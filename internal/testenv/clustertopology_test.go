package testenv

import (
	"slices"
	"testing"
)

func TestKeySlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int
	}{
		// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
		{"foo", 12182},
		{"123456789", 12739},
		{"{user1000}.following", KeySlot("user1000")},
		{"{}x", KeySlot("{}x")}, // an empty tag is no tag: the whole key
	} {
		if got := KeySlot(tc.key); got != tc.want {
			t.Errorf("KeySlot(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

func TestParseClusterNodes(t *testing.T) {
	out := `a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
a2 127.0.0.1:7001@17001 master,fail - 1 1 2 disconnected
a4 127.0.0.1:7003@17003 slave a1 1 1 1 connected
short line
`
	got := ParseClusterNodes(out)
	want := []ClusterNode{
		{ID: "a1", Addr: "127.0.0.1:7000", Master: true, Slots: []string{"0-5460"}},
		{ID: "a2", Addr: "127.0.0.1:7001", Master: true, Failed: true, Slots: []string{}},
		{ID: "a4", Addr: "127.0.0.1:7003", MasterID: "a1", Slots: []string{}},
	}
	if !slices.EqualFunc(got, want, func(a, b ClusterNode) bool {
		return a.ID == b.ID && a.Addr == b.Addr && a.MasterID == b.MasterID &&
			a.Master == b.Master && a.Failed == b.Failed && slices.Equal(a.Slots, b.Slots)
	}) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

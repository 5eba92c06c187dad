package ingest

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestStandalone: a stream on a single server is told from a clustered one
// with one copy left, whether the server sends no cluster information
// (nats-server 2.9) or the leader alone.
func TestStandalone(t *testing.T) {
	cases := []struct {
		name string
		ci   *jetstream.ClusterInfo
		want bool
	}{
		{"no cluster information (2.9 single server)", nil, true},
		{"leader alone (later single server)", &jetstream.ClusterInfo{Leader: "n1"}, true},
		{"clustered R1", &jetstream.ClusterInfo{Name: "c", RaftGroup: "S-R1F-x", Leader: "n1"}, false},
		{"clustered R3 with its replicas lost", &jetstream.ClusterInfo{Name: "c", RaftGroup: "S-R3F-x", Leader: "n1"}, false},
		{"clustered without a leader", &jetstream.ClusterInfo{Name: "c", RaftGroup: "S-R3F-x"}, false},
		{"replicas listed", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{{Name: "n2", Current: true}}}, false},
	}
	for _, tc := range cases {
		if got := standalone(tc.ci); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

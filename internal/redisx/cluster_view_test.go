package redisx

import "testing"

// TestParseView: CLUSTER NODES after a failover: the dead master has no
// slots left, its replica serves them; a dead replica; a master marked
// failed that still owns slots (cluster-require-full-coverage no).
func TestParseView(t *testing.T) {
	out := `a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
a2 127.0.0.1:7001@17001 master,fail - 1 1 2 disconnected
a3 127.0.0.1:7002@17002 master - 0 1 3 connected 10923-16383
a4 127.0.0.1:7003@17003 slave,fail a1 1 1 1 disconnected
a5 127.0.0.1:7004@17004 master - 0 1 7 connected 5461-10922
a6 127.0.0.1:7005@17005 master,fail? - 0 1 8 connected 16000
`
	v := parseView(out)
	want := map[string]string{
		"127.0.0.1:7001": "master", "127.0.0.1:7003": "replica", "127.0.0.1:7005": "master serving slots",
	}
	if len(v.down) != len(want) {
		t.Errorf("down: got %v, want %v", v.down, want)
	}
	for a, r := range want {
		if v.down[a] != r {
			t.Errorf("down[%s]: got %q, want %q", a, v.down[a], r)
		}
	}
	if wantM := "127.0.0.1:7000 0-5460\n127.0.0.1:7002 10923-16383\n127.0.0.1:7004 5461-10922"; v.masters != wantM {
		t.Errorf("masters:\n got %q\nwant %q", v.masters, wantM)
	}
	if len(v.addrs) != 6 {
		t.Errorf("addrs: got %v, want 6", v.addrs)
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/marketdata/marketdata/ingest"
)

// TestReplicasFlagOverridesEnv: MD_STREAM_REPLICAS sets the replicas of the
// streams unless --replicas is given (also --replicas=1 against an env of 3).
func TestReplicasFlagOverridesEnv(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want int
	}{
		{"", nil, 1},
		{"3", nil, 3},
		{"3", []string{"--replicas=1"}, 1},
		{"1", []string{"--replicas", "3"}, 3},
		{"", []string{"--replicas=5"}, 5},
	} {
		t.Run(tc.env+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			cfg, err := LoadConfig(envOf(map[string]string{"MD_STREAM_REPLICAS": tc.env}), secretsUnused)
			if err != nil {
				t.Fatal(err)
			}
			fs := pflag.NewFlagSet("ingest", pflag.ContinueOnError)
			var ic ingest.Config
			ingestFlags(fs, &ic)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			applyReplicas(fs, cfg, &ic)
			if ic.Replicas != tc.want {
				t.Errorf("replicas: got %d, want %d", ic.Replicas, tc.want)
			}
			if err := validateIngest(&ic); err != nil {
				t.Errorf("validateIngest: %v", err)
			}
		})
	}
	for _, bad := range []int{0, 6} {
		if err := validateReplicas(&ingest.Config{Replicas: bad}); err == nil || !strings.Contains(err.Error(), "--replicas") {
			t.Errorf("--replicas=%d: got %v, want an error naming --replicas", bad, err)
		}
	}
}

// TestFeedTakesReplicas: `feed` has the same --replicas flag.
func TestFeedTakesReplicas(t *testing.T) {
	cmd := newRoot(envOf(nil), nil, nil)
	feed, _, err := cmd.Find([]string{"feed"})
	if err != nil {
		t.Fatal(err)
	}
	if f := feed.Flags().Lookup("replicas"); f == nil || !strings.Contains(f.Usage, "MD_STREAM_REPLICAS") {
		t.Fatalf("feed --replicas: got %v, want a flag that overrides MD_STREAM_REPLICAS", f)
	}
}

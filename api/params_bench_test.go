package api

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseIDs parses a snapshot's longest common query: 50 distinct
// market ids, as a poller sends on every request.
func BenchmarkParseIDs(b *testing.B) {
	ids := make([]string, 50)
	for i := range ids {
		ids[i] = fmt.Sprintf("mk_%06d", i*4999)
	}
	raw := strings.Join(ids, ",")
	b.ReportAllocs()
	for b.Loop() {
		if got, err := parseIDs(raw); err != nil || len(got) != 50 {
			b.Fatalf("parseIDs: %d ids, %v", len(got), err)
		}
	}
}

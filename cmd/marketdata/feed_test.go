package main

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/internal/testenv"
)

// TestFeedRateForms: `marketdata feed` takes --rate in both of the
// contract's forms, R and R/s, through the real command line: the flag
// holds the same rate, and the command goes past its flags and checks to
// connecting to NATS (here a closed port, so it stops there, naming
// MD_NATS_URL rather than --rate). A form it does not take is refused
// naming --rate.
func TestFeedRateForms(t *testing.T) {
	closed := fmt.Sprintf("nats://127.0.0.1:%d", testenv.FreePort(t))
	for _, in := range []string{"200", "200/s"} {
		t.Run(in, func(t *testing.T) {
			feed, _, err := newRoot(envOf(nil), io.Discard, io.Discard).Find([]string{"feed"})
			if err != nil {
				t.Fatal(err)
			}
			if err := feed.ParseFlags([]string{"--rate", in}); err != nil {
				t.Fatalf("feed --rate %s: %v", in, err)
			}
			if got := feed.Flags().Lookup("rate").Value.String(); got != "200" {
				t.Errorf("feed --rate %s: the flag holds %s, want 200", in, got)
			}
			_, err = run(t, map[string]string{"MD_NATS_URL": closed}, "feed", "--rate", in, "--events", "1")
			if err == nil || !strings.HasPrefix(err.Error(), "MD_NATS_URL: ") {
				t.Errorf("feed --rate %s with NATS unreachable: got %v, want the NATS connection refused, not the flag", in, err)
			}
		})
	}
	_, err := run(t, map[string]string{"MD_NATS_URL": closed}, "feed", "--rate", "200/m")
	if err == nil || !strings.Contains(err.Error(), `"--rate" flag`) {
		t.Errorf("feed --rate 200/m: got %v, want a refusal naming --rate", err)
	}
}

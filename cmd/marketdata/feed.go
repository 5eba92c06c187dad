package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/ingest/feed"
)

// feedOptions are the flags of `marketdata feed`.
type feedOptions struct {
	events    int
	rate      float64
	duration  time.Duration
	max       int
	seed      uint64
	skipInit  bool
	eventLife time.Duration
}

// defaultEventLife paces the synthetic world's lifecycle (feed.GenConfig's
// EventLife): markets live about a day, long enough for their candles over
// the last hours to show them trading, and a 200-event world still sees a
// resolution, merge or new event every few minutes.
const defaultEventLife = 12 * time.Hour

func (o *feedOptions) flags(cmd *cobra.Command, events int, rate float64) {
	fs := cmd.Flags()
	fs.IntVar(&o.events, "events", events, "events in the synthetic world")
	o.rate = rate
	fs.Var((*rateValue)(&o.rate), "rate", "messages per second after the initial state, written 200 or 200/s (0 = as fast as NATS takes them)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0 = until interrupted)")
	fs.IntVar(&o.max, "max-messages", 0, "stop after this many messages (0 = no limit)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed: the same seed gives the same world")
	fs.BoolVar(&o.skipInit, "skip-initial", false, "publish only changes, not the initial state")
	fs.DurationVar(&o.eventLife, "event-life", defaultEventLife, "resolutions, merges and new events come about once per live event per this long, by the clock (0 = with 3% of the messages: a market lives minutes)")
}

func (o *feedOptions) validate() error {
	switch {
	case o.events < 1 || o.events > 1_000_000:
		return fmt.Errorf("--events: %d is not within 1..1000000", o.events)
	case !(o.rate >= 0) || math.IsInf(o.rate, 1):
		return fmt.Errorf("--rate: %v is not a rate of 0 or more messages per second", o.rate)
	case o.duration < 0:
		return fmt.Errorf("--duration: %v is negative", o.duration)
	case o.max < 0:
		return fmt.Errorf("--max-messages: %d is negative", o.max)
	case o.eventLife < 0:
		return fmt.Errorf("--event-life: %v is negative", o.eventLife)
	}
	return nil
}

// rateValue is --rate: messages per second, written "200" or "200/s"
// (contract §1). Set only parses; validate refuses what is out of range,
// naming the flag.
type rateValue float64

func (r *rateValue) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) }

func (r *rateValue) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "/s"), 64)
	if err != nil {
		return fmt.Errorf("%q is not a rate like 200 or 200/s", s)
	}
	*r = rateValue(v)
	return nil
}

func (r *rateValue) Type() string { return "rate" }

func (c *cli) feedCmd() *cobra.Command {
	var o feedOptions
	ic := ingest.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "feed",
		Short: "Publish a synthetic matcher stream to NATS (--events N --rate R --duration D)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			cfg, err := LoadConfig(c.getenv, secretsUnused)
			if err != nil {
				return err
			}
			applyReplicas(cmd.Flags(), cfg, &ic)
			if err := validateStreams(&ic); err != nil {
				return err
			}
			if err := validateReplicas(&ic); err != nil {
				return err
			}
			log, err := c.logger()
			if err != nil {
				return err
			}
			st, err := runFeed(cmd.Context(), cfg.NATSURL, ic, o, log)
			if err != nil {
				return err
			}
			return c.print(map[string]any{"published": st.Published, "failed": st.Failed, "seconds": st.Elapsed.Seconds()},
				fmt.Sprintf("published %d messages (%d failed) in %s", st.Published, st.Failed, st.Elapsed.Round(time.Millisecond)))
		},
	}
	o.flags(cmd, 1000, 100)
	streamFlags(cmd.Flags(), &ic)
	return cmd
}

// runFeed publishes the synthetic stream until its options or ctx stop it.
func runFeed(ctx context.Context, natsURL string, ic ingest.Config, o feedOptions, log *slog.Logger) (feed.Stats, error) {
	nc, err := connectNATS(natsURL, "marketdata feed", log)
	if err != nil {
		return feed.Stats{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return feed.Stats{}, fmt.Errorf("feed: jetstream: %w", err)
	}
	if err := ingest.EnsureStreams(ctx, js, ic, log); err != nil {
		if ctx.Err() != nil {
			// Stopped (Ctrl-C) while the streams were being set up: a
			// stop like any other, not a failure.
			return feed.Stats{}, nil
		}
		return feed.Stats{}, err
	}
	g := feed.NewGenerator(feed.GenConfig{Events: o.events, Seed: o.seed, SubjectPrefix: ic.SubjectPrefix, EventLife: o.eventLife})
	st, err := feed.Run(ctx, js, g, feed.RunOptions{
		Rate: o.rate, Duration: o.duration, MaxMessages: o.max, SkipInitial: o.skipInit, Logger: log,
	})
	if ctx.Err() != nil {
		err = nil // interrupted on purpose
	}
	return st, err
}

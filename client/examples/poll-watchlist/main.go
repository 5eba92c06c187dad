// Command poll-watchlist polls the prices of a watchlist of markets and
// prints each change as it comes: the Poller sends If-None-Match, so an
// unchanged watchlist costs one 304 per 50 markets and prints nothing.
//
//	MD_KEY=mdk_live_… go run ./client/examples/poll-watchlist -ids mkt-1,mkt-2 -interval 2s
//	MD_KEY=mdk_live_… go run ./client/examples/poll-watchlist -events 3 -for 1m
//
// With -events N (and no -ids) the watchlist is the active markets of the
// first N events of the listing: one listing call plus one read per event.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/marketdata/marketdata/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "poll-watchlist:", err)
		os.Exit(1)
	}
}

func run() error {
	baseURL := flag.String("base-url", client.DefaultBaseURL, "the API's base URL")
	ids := flag.String("ids", "", "comma-separated market universal ids to watch")
	events := flag.Int("events", 3, "without -ids: watch the active markets of the first N events")
	interval := flag.Duration("interval", 2*time.Second, "time between polls (at least 1s)")
	duration := flag.Duration("for", 0, "stop after this long (0: until interrupted)")
	flag.Parse()
	key := os.Getenv("MD_KEY")
	if key == "" {
		return errors.New("set MD_KEY to an API key (scope markets:read)")
	}
	c, err := client.New(key, client.WithBaseURL(*baseURL))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}

	watch := splitIDs(*ids)
	if len(watch) == 0 {
		if watch, err = marketsOfEvents(ctx, c, *events); err != nil {
			return err
		}
	}
	fmt.Printf("watching %d markets every %v\n", len(watch), *interval)
	p, err := c.NewPoller(watch, *interval)
	if err != nil {
		return err
	}
	rounds, changes := 0, 0
	err = p.Run(ctx, func(changed []client.Price) {
		rounds++
		for _, pr := range changed {
			changes++
			fmt.Printf("%s %-24s bid %s ask %s  v%d\n", pr.UpdatedAt.Format("15:04:05.000"), pr.MarketID,
				price(pr.BestBid), price(pr.BestAsk), pr.Version)
		}
	})
	if m := p.Missing(); len(m) > 0 {
		fmt.Printf("not served (or no price yet): %s\n", strings.Join(m, ", "))
	}
	summary := fmt.Sprintf("%d prices handed over in %d rounds with changes", changes, rounds)
	if rl, ok := c.RateLimit(); ok {
		summary += fmt.Sprintf("; %d of %d requests left in the window", rl.Remaining, rl.Limit)
	}
	fmt.Println(summary)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// marketsOfEvents returns the active markets of the first n events.
func marketsOfEvents(ctx context.Context, c *client.Client, n int) ([]string, error) {
	var ids []string
	seen := 0
	for ev, err := range c.Events(ctx, client.EventsFilter{Limit: min(max(n, 1), 100)}) {
		if err != nil {
			return nil, err
		}
		if seen++; seen > n {
			break
		}
		detail, err := c.Event(ctx, ev.UniversalID)
		if err != nil {
			return nil, err
		}
		for _, m := range detail.Markets {
			ids = append(ids, m.UniversalID)
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("no active markets found: pass -ids")
	}
	return ids, nil
}

func splitIDs(s string) []string {
	var ids []string
	for id := range strings.SplitSeq(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

func price(p *float64) string {
	if p == nil {
		return "  – "
	}
	return fmt.Sprintf("%.2f", *p)
}

// Command stream-prices prints the price changes of markets as the API
// streams them, and what happens to the stream (reconnects, markets not
// served), until interrupted.
//
//	MD_KEY=mdk_live_… go run ./client/examples/stream-prices mkt-1 mkt-2
//	MD_KEY=mdk_live_… go run ./client/examples/stream-prices -events 3 -for 1m
//
// The key needs the stream:read scope. Without market ids the stream
// follows the active markets of the first N events of the listing (-events,
// which needs markets:read too).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/marketdata/marketdata/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "stream-prices:", err)
		os.Exit(1)
	}
}

func run() error {
	baseURL := flag.String("base-url", client.DefaultBaseURL, "the API's base URL")
	events := flag.Int("events", 3, "without market ids: follow the active markets of the first N events")
	duration := flag.Duration("for", 0, "stop after this long (0: until interrupted)")
	flag.Parse()
	key := os.Getenv("MD_KEY")
	if key == "" {
		return errors.New("set MD_KEY to an API key (scope stream:read)")
	}
	c, err := client.New(key, client.WithBaseURL(*baseURL))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	ids := flag.Args()
	if len(ids) == 0 {
		if ids, err = marketsOfEvents(ctx, c, *events); err != nil {
			return err
		}
	}

	s, err := c.Stream(ctx, ids)
	if err != nil {
		return err // a *client.Error: 401, 403 insufficient_scope, ...
	}
	defer s.Close() //nolint:errcheck // Close returns nil
	prices := 0
	for ev, err := range s.Events(ctx) {
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				fmt.Printf("%d prices handed over, %d conflated while this program was busy\n", prices, s.Conflated())
				return nil
			}
			return err // a *client.StreamClosedError: 4401 key revoked, 4403 access withdrawn
		}
		now := time.Now().UTC().Format("15:04:05.000")
		switch ev.Kind {
		case client.StreamPrice:
			prices++
			p := ev.Price
			fmt.Printf("%s %-20s v%-3d bid %s ask %s  %s\n", now, p.MarketID, p.Version,
				price(p.BestBid), price(p.BestAsk), venues(p))
		case client.StreamConnected:
			if ev.Reconnect {
				fmt.Printf("%s reconnected\n", now)
			} else {
				fmt.Printf("%s connected\n", now)
			}
		case client.StreamSubscribed:
			fmt.Printf("%s subscribed to %d markets", now, len(ev.MarketIDs))
			if len(ev.Missing) > 0 {
				fmt.Printf("; not served: %s", strings.Join(ev.Missing, ", "))
			}
			fmt.Println()
		case client.StreamDisconnected:
			fmt.Printf("%s disconnected (attempt %d, again in %v): %v\n", now, ev.Attempts, ev.RetryIn.Round(time.Millisecond), ev.Err)
		case client.StreamUnsubscribed, client.StreamRefused:
			fmt.Printf("%s %s %v %v\n", now, ev.Kind, ev.MarketIDs, ev.Err)
		}
	}
	return nil
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
		return nil, errors.New("no active markets found: pass market ids")
	}
	return ids, nil
}

func price(p *float64) string {
	if p == nil {
		return "  – "
	}
	return fmt.Sprintf("%.2f", *p)
}

// venues lists each venue's bid/ask.
func venues(p *client.Price) string {
	names := make([]string, 0, len(p.Quotes))
	for v := range p.Quotes {
		names = append(names, v)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, v := range names {
		q := p.Quotes[v]
		parts = append(parts, fmt.Sprintf("%s %s/%s", v, price(q.Bid), price(q.Ask)))
	}
	return strings.Join(parts, "  ")
}

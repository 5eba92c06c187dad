// Command stream-prices prints the price changes of markets as the API
// streams them, and what happens to the stream (reconnects, markets not
// served), until interrupted.
//
//	MD_KEY=mdk_live_… go run ./client/examples/stream-prices -base http://127.0.0.1:8080 MARKET_ID...
//
// The key needs the stream:read scope.
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
	base := flag.String("base", client.DefaultBaseURL, "the API's base URL")
	runFor := flag.Duration("for", 0, "stop after this long (0: until interrupted)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: MD_KEY=mdk_live_… %s [-base URL] [-for DURATION] MARKET_ID...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	key := os.Getenv("MD_KEY")
	if key == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*base, key, flag.Args(), *runFor); err != nil {
		fmt.Fprintln(os.Stderr, "stream-prices:", err)
		os.Exit(1)
	}
}

func run(base, key string, ids []string, runFor time.Duration) error {
	c, err := client.New(key, client.WithBaseURL(base))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, runFor)
		defer cancel()
	}
	s, err := c.Stream(ctx, ids)
	if err != nil {
		return err // an *client.Error: 401, 403 insufficient_scope, ...
	}
	defer s.Close() //nolint:errcheck // Close returns nil
	prices := 0
	for ev, err := range s.Events(ctx) {
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				fmt.Printf("done: %d prices, %d conflated\n", prices, s.Conflated())
				return nil
			}
			return err // a *client.StreamClosedError: 4401 key revoked, 4403 access withdrawn
		}
		now := time.Now().UTC().Format("15:04:05.000")
		switch ev.Kind {
		case client.StreamPrice:
			prices++
			p := ev.Price
			fmt.Printf("%s %-24s v%-4d bid %s ask %s %s\n", now, p.MarketID, p.Version,
				price(p.BestBid), price(p.BestAsk), venues(p))
		case client.StreamConnected:
			fmt.Printf("%s connected (reconnect: %v)\n", now, ev.Reconnect)
		case client.StreamSubscribed:
			fmt.Printf("%s subscribed %d markets", now, len(ev.MarketIDs))
			if len(ev.Missing) > 0 {
				fmt.Printf(", not served: %s", strings.Join(ev.Missing, " "))
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

func price(p *float64) string {
	if p == nil {
		return "  -  "
	}
	return fmt.Sprintf("%.3f", *p)
}

// venues lists each venue's bid/ask.
func venues(p *client.Price) string {
	names := make([]string, 0, len(p.Quotes))
	for v := range p.Quotes {
		names = append(names, v)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, v := range names {
		q := p.Quotes[v]
		fmt.Fprintf(&b, " %s %s/%s", v, price(q.Bid), price(q.Ask))
	}
	return strings.TrimSpace(b.String())
}

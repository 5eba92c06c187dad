package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/marketdata/marketdata/client"
)

func ExampleNew() {
	c, err := client.New(os.Getenv("MD_KEY"),
		client.WithBaseURL("https://api.example.com"),
		client.WithMaxRetryAfter(10*time.Second), // a longer Retry-After is returned as an *Error
	)
	if err != nil {
		log.Fatal(err)
	}
	k, err := c.Key(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("key …%s: %d requests per %d s\n", k.Last4, k.Limit, k.WindowS)
}

func ExampleClient_Events() {
	c, err := client.New(os.Getenv("MD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for ev, err := range c.Events(ctx, client.EventsFilter{Category: "politics", MinVenues: 3}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.UniversalID, ev.Title, ev.VenueCount)
	}
}

func ExampleClient_VenueIndex() {
	c, err := client.New(os.Getenv("MD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	index, err := c.VenueIndex(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	// Which of our events is venue_a's event "PRES-2028"?
	fmt.Println(index[client.VenueKey{Venue: client.VenueA, ID: "PRES-2028"}])
}

func ExampleClient_Snapshot() {
	c, err := client.New(os.Getenv("MD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	// Any number of ids: more than 50 are split into concurrent requests.
	snap, err := c.Snapshot(context.Background(), []string{"mkt-1", "mkt-2", "mkt-3"})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range snap.Data {
		if p.BestBid != nil && p.BestAsk != nil {
			fmt.Printf("%s %.2f/%.2f (v%d)\n", p.MarketID, *p.BestBid, *p.BestAsk, p.Version)
		}
	}
	fmt.Println("not served:", snap.Missing)
}

func ExamplePoller_Run() {
	c, err := client.New(os.Getenv("MD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	p, err := c.NewPoller([]string{"mkt-1", "mkt-2"}, 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = p.Run(ctx, func(changed []client.Price) {
		for _, pr := range changed {
			fmt.Println(pr.MarketID, "now at version", pr.Version)
		}
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		log.Fatal(err)
	}
}

func ExampleClient_RateLimit() {
	c, err := client.New(os.Getenv("MD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Search(context.Background(), "election", 10); err != nil {
		log.Fatal(err)
	}
	if rl, ok := c.RateLimit(); ok {
		fmt.Printf("%d of %d requests left; the window frees capacity in %v\n", rl.Remaining, rl.Limit, rl.Reset)
	}
}

// Errors of the API are *client.Error values: errors.As finds them.
func ExampleError() {
	// What Event returns for an event merged into another.
	var err error = fmt.Errorf("load: %w", &client.Error{
		Status: 404, Code: "not_found", Message: "event not found", MergedInto: "ev-2", RequestID: "r1",
	})

	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.MergedInto != "" {
		fmt.Println("read", apiErr.MergedInto, "instead")
	}
	fmt.Println(err)
	// Output:
	// read ev-2 instead
	// load: marketdata: 404 not_found: event not found (merged into ev-2) [request r1]
}

func ExampleEvent_VenueIDs() {
	ticker, slug := "PRES-28", "presidential-election-2028"
	ev := client.Event{UniversalID: "ev-1", VenueAEventTicker: &ticker, VenueBEventSlug: &slug, VenueCount: 2}
	ids := ev.VenueIDs()
	fmt.Println(ids[client.VenueA], ids[client.VenueB], len(ids))
	// Output: PRES-28 presidential-election-2028 2
}

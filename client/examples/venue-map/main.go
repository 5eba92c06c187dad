// Command venue-map walks the event listing once and maps each venue's own
// event id to the event's universal id: the way to find our event for a
// venue's id (there is no lookup by venue id). With -markets it also reads
// each event (one call per event) to map the venues' market ids.
//
//	MD_KEY=mdk_live_… go run ./client/examples/venue-map
//	MD_KEY=mdk_live_… go run ./client/examples/venue-map -venue venue_a -id PRES-28
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"

	"github.com/marketdata/marketdata/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "venue-map:", err)
		os.Exit(1)
	}
}

func run() error {
	baseURL := flag.String("base-url", client.DefaultBaseURL, "the API's base URL")
	venue := flag.String("venue", "", "look up one id of this venue (venue_a … venue_d)")
	id := flag.String("id", "", "the venue's own event id to look up (with -venue)")
	markets := flag.Bool("markets", false, "also map the venues' market ids (reads every event: 1+N calls)")
	limit := flag.Int("print", 10, "print at most this many entries of the map")
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

	index, err := c.VenueIndex(ctx)
	if err != nil {
		return err
	}
	if *venue != "" || *id != "" {
		u, ok := index[client.VenueKey{Venue: *venue, ID: *id}]
		if !ok {
			return fmt.Errorf("%s has no served event %q", *venue, *id)
		}
		fmt.Printf("%s %s → %s\n", *venue, *id, u)
		return nil
	}

	perVenue := map[string]int{}
	events := map[string]bool{}
	keys := make([]client.VenueKey, 0, len(index))
	for k, u := range index {
		perVenue[k.Venue]++
		events[u] = true
		keys = append(keys, k)
	}
	fmt.Printf("%d events, %d venue event ids:", len(events), len(index))
	for _, v := range client.Venues {
		fmt.Printf(" %s %d", v, perVenue[v])
	}
	fmt.Println()
	slices.SortFunc(keys, func(a, b client.VenueKey) int {
		return cmp.Or(cmp.Compare(index[a], index[b]), cmp.Compare(a.Venue, b.Venue))
	})
	for i, k := range keys {
		if i == *limit {
			fmt.Printf("… %d more\n", len(keys)-i)
			break
		}
		fmt.Printf("  %-8s %-28s → %s\n", k.Venue, k.ID, index[k])
	}

	if *markets {
		ids := make([]string, 0, len(events))
		for u := range events {
			ids = append(ids, u)
		}
		slices.Sort(ids)
		n := 0
		fmt.Println("venue market ids:")
		for _, u := range ids {
			ev, err := c.Event(ctx, u)
			var apiErr *client.Error
			if errors.As(err, &apiErr) && apiErr.Status == 404 {
				continue // resolved or merged since the walk
			}
			if err != nil {
				return err
			}
			for _, m := range ev.Markets {
				for _, v := range client.Venues {
					mid, ok := m.Venues[v]
					if !ok {
						continue
					}
					if n < *limit {
						fmt.Printf("  %-8s %-28s → market %s of %s\n", v, mid, m.UniversalID, u)
					}
					n++
				}
			}
		}
		fmt.Printf("%d venue market ids in %d event reads\n", n, len(ids))
	}
	return nil
}

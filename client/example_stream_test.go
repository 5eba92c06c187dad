package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/marketdata/marketdata/client"
)

// A stream of two markets' prices: the client reconnects by itself; the
// loop ends when the key is revoked (4401), the account's access withdrawn
// (4403), or ctx ends.
func ExampleClient_Stream() {
	c, err := client.New(os.Getenv("MD_KEY"), client.WithBaseURL("https://api.example.com"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.Stream(ctx, []string{"mkt-fed-march-cut", "mkt-fed-march-hold"})
	if err != nil {
		var e *client.Error
		if errors.As(err, &e) && e.Code == "insufficient_scope" {
			log.Fatal("the key needs the stream:read scope")
		}
		log.Fatal(err)
	}
	defer s.Close() //nolint:errcheck // Close returns nil
	for ev, err := range s.Events(ctx) {
		if err != nil {
			var closed *client.StreamClosedError
			if errors.As(err, &closed) && closed.Code == client.CloseKeyRevoked {
				log.Fatal("the key was revoked")
			}
			log.Fatal(err)
		}
		switch ev.Kind {
		case client.StreamPrice:
			fmt.Println(ev.Price.MarketID, ev.Price.Version, ev.Price.Status)
		case client.StreamSubscribed:
			fmt.Println("not served:", ev.Missing)
		case client.StreamDisconnected:
			fmt.Println("reconnecting in", ev.RetryIn, "after", ev.Err)
		}
	}
}

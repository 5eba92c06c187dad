package main

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

func natsStatus(nc *nats.Conn) error {
	if s := nc.Status(); s != nats.CONNECTED {
		return fmt.Errorf("nats connection is %s", s)
	}
	return nil
}

package stream

import (
	"fmt"
	"time"
)

// Config sizes a Hub. DefaultConfig has the contract's values; New refuses
// a zero.
type Config struct {
	// PingEvery is how often a connection is pinged (15s).
	PingEvery time.Duration
	// PongWait closes a connection that answered no ping for this long (45s).
	PongWait time.Duration
	// StallAfter closes (4008) a connection whose client took nothing for
	// this long while a message waited (30s).
	StallAfter time.Duration
	// StallGrace is how long a stalled connection's last write may still
	// complete, so that a client that reads again gets the 4008 close frame
	// after whole messages; then the connection is cut (500ms: with the
	// sweep's 250 ms, within the contract's 1 s of the cause).
	StallGrace time.Duration
	// CloseWait bounds a close: the close frame is written within it, and
	// the connection is cut when the client has not answered it by then
	// (500ms: the contract's 1 s for every close code has room).
	CloseWait time.Duration
	// Resync is how often every market subscribed on the node is read
	// again, the safety net under lost change notices (2s, the read path's
	// bound on node memory).
	Resync time.Duration
	// ReadTimeout bounds one fan-out read.
	ReadTimeout time.Duration
	// Workers are the fan-out workers (2): each owns the markets of some
	// of the hub's shards, so a market's versions are fanned out by one
	// goroutine, in the order their notices came. As many goroutines read
	// the markets noticed without their items, and as many read current
	// prices for subscribes.
	Workers int
	// Queue is how many notices' worth of items wait for one fan-out
	// worker (1024); a worker whose queue is full drops the items and the
	// hub resyncs.
	Queue int
}

// DefaultConfig is the one home of the streams' defaults (contract §3).
func DefaultConfig() Config {
	return Config{
		PingEvery: 15 * time.Second, PongWait: 45 * time.Second,
		StallAfter: 30 * time.Second, StallGrace: 500 * time.Millisecond, CloseWait: 500 * time.Millisecond,
		Resync: 2 * time.Second, ReadTimeout: 2 * time.Second, Workers: 2, Queue: 1024,
	}
}

func (c Config) check() error {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"PingEvery", c.PingEvery}, {"PongWait", c.PongWait}, {"StallAfter", c.StallAfter},
		{"StallGrace", c.StallGrace}, {"CloseWait", c.CloseWait}, {"Resync", c.Resync}, {"ReadTimeout", c.ReadTimeout},
	} {
		if f.v <= 0 {
			return fmt.Errorf("stream: Config.%s is %s, want a positive duration", f.name, f.v)
		}
	}
	if c.PongWait <= c.PingEvery {
		return fmt.Errorf("stream: Config.PongWait (%s) must be longer than PingEvery (%s)", c.PongWait, c.PingEvery)
	}
	if c.Workers < 1 {
		return fmt.Errorf("stream: Config.Workers is %d, want at least 1", c.Workers)
	}
	if c.Queue < 1 {
		return fmt.Errorf("stream: Config.Queue is %d, want at least 1", c.Queue)
	}
	return nil
}

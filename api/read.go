package api

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/cache"
)

// readWhileAdmitting chooses how a data route runs its read against its
// admission: at the same time (the read's memory and Redis steps overlap
// the limiter's round trip; its store step waits for the admission), or
// one after the other. The reads benchmark decided (see docs/notes.md).
const readWhileAdmitting = true

// admitRead admits the request (admit) and, when ok (its parameters
// parsed), runs read: concurrently or after the admission (see
// readWhileAdmitting). read gets only a context, never c (Fiber reuses c
// once the handler returns), and must use only values the handler parsed
// and copied. The admission's refusal comes first; then read's error.
func (s *Server) admitRead(c *fiber.Ctx, ok bool, read func(context.Context) error) error {
	if !ok {
		return s.admit(c)
	}
	ctx := c.UserContext()
	if !readWhileAdmitting {
		if err := s.admit(c); err != nil {
			return err
		}
		return read(ctx)
	}
	gate := make(chan struct{})
	var admitted bool // written before gate closes, read after
	done := make(chan error, 1)
	go func() {
		defer func() {
			// A panic here is off the handler's goroutine: recover.New
			// does not see it. It becomes the request's error (503).
			if p := recover(); p != nil {
				done <- fmt.Errorf("api: read panicked: %v", p)
			}
		}()
		done <- read(cache.Gated(ctx, func() bool { <-gate; return admitted }))
	}()
	err := s.admit(c)
	admitted = err == nil
	close(gate)
	rerr := <-done
	if err != nil {
		return err
	}
	return rerr
}

// readFailed is the answer to a read error the route does not answer
// itself (cache.ErrUnavailable, mostly): the data cannot be read (503).
func readFailed(err error) error {
	return &Error{Kind: KindUnavailable, Message: "the data cannot be read right now; try again", Err: err}
}

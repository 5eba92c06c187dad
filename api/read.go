package api

import "github.com/gofiber/fiber/v2"

// Admission and read. The limiter only limits (ratelimit.Limiter.Admit)
// and the Reader only reads, each with its own batched Redis round trip.
// Issue 9 asked what separating them costs: on a quiet machine, one run
// each, the reads bench gave the binary from before the split (the reads
// rode the admission's pipeline) snapshot 37.3k rps, /events page 37.0k,
// event read 48.5k; the split, run one after the other, 28.5k, 29.9k, 43.8k
// (-24 %, -19 %, -10 %). Over 10 %, the snapshot and the /events page now
// start their read's round trip before the admission and finish it after
// (cache.Reader.BeginPrices / BeginPage: queued, no goroutine), so the two
// trips overlap; the event read, within 10 %, reads after its admission.
// Only Finish reads Postgres or schedules a repair, so a refused request
// never costs the store anything; its queued trip is discarded (Discard).

// readFailed is the answer to a read error the route does not answer
// itself (cache.ErrUnavailable, mostly): the data cannot be read (503).
func readFailed(err error) error {
	return &Error{Kind: KindUnavailable, Message: "the data cannot be read right now; try again", Err: err}
}

// begunRead is a read whose round trip is on its way (cache.PricesRead,
// cache.PageRead); nil is none.
type begunRead interface{ Discard() }

// admitBegun runs the admission while read's round trip is on its way, then
// answers a bad parameter (perr, found before the read was begun): the
// contract's order, 429 before 422. A request it refuses discards the read.
func (s *Server) admitBegun(c *fiber.Ctx, read begunRead, perr *Error) error {
	if err := s.admit(c); err != nil {
		read.Discard()
		return err
	}
	if perr != nil {
		read.Discard()
		return perr
	}
	return nil
}

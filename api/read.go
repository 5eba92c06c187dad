package api

import "github.com/gofiber/fiber/v2"

// Admission and read. The limiter only limits (ratelimit.Limiter.Admit)
// and the Reader only reads, each with its own batched Redis round trip.
// Two trips one after the other cost the hottest routes a fifth of their
// rate (docs/benchmarks.md), so the snapshot and the /events page start
// their read's round trip before the admission and finish it after
// (cache.Reader.BeginPrices / BeginPage: queued, no goroutine), and the two
// trips overlap; the event read, which lost less, reads after its admission.
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

package api

import "github.com/gofiber/fiber/v2"

// searchEvents answers GET /markets/search from the node's in-memory index.
func (s *Server) searchEvents(c *fiber.Ctx) error {
	q, limit, perr := parseSearch(c.Query("q"), param(c, "limit"))
	if err := s.admit(c); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if !s.search.Ready() {
		return &Error{Kind: KindUnavailable, Message: "search is loading; try again"}
	}
	body, tag := s.search.answer(q, limit, listBody)
	return sendTagged(c, body, tag)
}

package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/api/search"
	"github.com/marketdata/marketdata/cache"
)

var _ search.Source = (*cache.Reader)(nil)

// searchEvents answers GET /markets/search from the node's in-memory index.
func (s *Server) searchEvents(c *fiber.Ctx) error {
	q, perr := parseSearch(c.Query("q"), param(c, "limit"), param(c, "min_confidence"), param(c, "relation"))
	if err := s.admit(c); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if !s.search.Ready() {
		return &Error{Kind: KindUnavailable, Message: "search is loading; try again"}
	}
	f := search.Filter{MinConfidence: q.filter.MinConfidence, Relation: q.filter.Relation}
	body, tag := s.search.Answer(q.q, q.limit, f, renderSearch)
	return sendTagged(c, body, tag)
}

// renderSearch is a search answer's body and its ETag.
func renderSearch(items [][]byte) ([]byte, string) {
	body := listBody(items)
	return body, bodyTag(body)
}

package api

import (
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// trades answers GET /markets/{universal_id}/trades.
func (s *Server) trades(c *fiber.Ctx) error {
	id := strings.Clone(c.Params("universal_id"))
	limit, perr := parseLimit(param(c, "limit"), 50, cache.MaxTrades)
	if err := s.admit(c); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if !store.ValidID(id) {
		return fail(KindNotFound, "no market has this id")
	}
	items, err := s.reader.Trades(c.UserContext(), id, limit)
	switch {
	case errors.Is(err, cache.ErrNotFound), errors.Is(err, cache.ErrNotServed):
		return fail(KindNotFound, "no served market has this id")
	case err != nil:
		return readFailed(err)
	}
	return sendList(c, items, nil, false)
}

package api

import (
	"context"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/cache"
)

// trades answers GET /markets/{universal_id}/trades.
func (s *Server) trades(c *fiber.Ctx) error {
	id := strings.Clone(c.Params("universal_id"))
	limit, perr := parseLimit(param(c, "limit"), 50, cache.MaxTrades)
	var items [][]byte
	err := s.admitRead(c, perr == nil && validID(id), func(ctx context.Context) (err error) {
		items, err = s.reader.Trades(ctx, id, limit)
		switch {
		case errors.Is(err, cache.ErrNotFound), errors.Is(err, cache.ErrNotServed):
			return fail(KindNotFound, "no served market has this id")
		case err != nil:
			return readFailed(err)
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case perr != nil:
		return perr
	case !validID(id):
		return fail(KindNotFound, "no market has this id")
	}
	return sendList(c, items, nil, false)
}

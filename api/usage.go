package api

// Usage counting's Fiber side: which contract route a request is. The
// counting and its flushes are api/usage's.

import (
	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/api/usage"
)

// usageRoutes maps a Fiber route path to the contract route it is counted
// under. A path not here (the catch-all 404 of unknown routes) is not
// counted: it names no route of the contract.
var usageRoutes = map[string]usage.Route{
	"/public/v1/key":                           usage.RouteKey,
	"/public/v1/events":                        usage.RouteEvents,
	"/public/v1/events/:universal_id":          usage.RouteEvent,
	"/public/v1/markets/search":                usage.RouteSearch,
	"/public/v1/prices/snapshot":               usage.RouteSnapshot,
	"/public/v1/markets/:universal_id/trades":  usage.RouteTrades,
	"/public/v1/account/keys":                  usage.RouteAccountKeys,
	"/public/v1/account/usage":                 usage.RouteAccountUsage,
	"/public/v1/stream":                        usage.RouteStream,
	"/public/v1/markets/:universal_id/candles": usage.RouteCandles,
}

// countUsage counts the request on its route; a route outside the
// contract's list is not counted.
func (s *Server) countUsage(c *fiber.Ctx, account string) {
	if s.usage == nil {
		return
	}
	r := c.Route()
	if r == nil {
		return
	}
	route, ok := usageRoutes[r.Path]
	if !ok {
		return
	}
	s.usage.Count(account, route)
}

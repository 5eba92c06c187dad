package api

import "github.com/gofiber/fiber/v2"

// AddScopedTestRoute registers GET path behind the full guard with the given
// scope, answering 200 {"ok":true}. Only /key exists in production and it
// needs no scope, so the scope check is reachable only this way; the route
// lives on the test's own server, never in production code. The path must
// not be under /public/v1, whose catch-all answers 404 first.
func (s *Server) AddScopedTestRoute(path, scope string) {
	s.app.Get(path, s.guard(scope), func(c *fiber.Ctx) error {
		if err := s.admit(c); err != nil {
			return err
		}
		return c.JSON(map[string]bool{"ok": true})
	})
}

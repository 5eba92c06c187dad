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

// CredentialsVersionSeen is the credentials version the node's poll last
// read (-1: none yet), so a test can wait until the poll has seen a change.
func (s *Server) CredentialsVersionSeen() int64 { return s.keys.version.Load() }

// SearchLoads is how many full Loads of the search index have completed, so
// a test can wait for a resync rather than sleep through its period.
func (s *Server) SearchLoads() int64 { return s.search.Loads() }

package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/docs"
)

// openAPI serves the public API's OpenAPI document, without authentication.
func (s *Server) openAPI(c *fiber.Ctx) error {
	body, err := docs.OpenAPIJSON()
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.Send(body)
}

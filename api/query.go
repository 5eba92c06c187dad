package api

import "github.com/gofiber/fiber/v2"

// sentEmpty stands for a parameter sent without a value ("limit=", "venue"):
// c.Query gives "" for it as for an absent one, but an empty value is not an
// integer, a venue or a category (422), while an absent one means the default
// or no filter. It is refused like any other bad character.
const sentEmpty = "\x00"

// param is the raw value of a query parameter, or sentEmpty.
func param(c *fiber.Ctx, name string) string {
	v := c.Query(name)
	if v == "" && c.Context().QueryArgs().Has(name) {
		return sentEmpty
	}
	return v
}

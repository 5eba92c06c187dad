package api

import (
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/ratelimit"
)

// Kind is one of the contract's error conditions (§2).
type Kind int

// The error kinds; each maps to one status and code in kinds.
const (
	KindUnauthorized Kind = iota + 1
	KindIPNotAllowed
	KindAccessNotGranted
	KindInsufficientScope
	KindNotFound
	KindInvalidRequest
	KindRateLimited
	KindOriginNotAllowed
	KindUnavailable
)

// kinds is the one table from error kind to status and code.
var kinds = map[Kind]struct {
	status int
	code   string
}{
	KindUnauthorized:      {fiber.StatusUnauthorized, "unauthorized"},
	KindIPNotAllowed:      {fiber.StatusForbidden, "ip_not_allowed"},
	KindAccessNotGranted:  {fiber.StatusForbidden, "access_not_granted"},
	KindInsufficientScope: {fiber.StatusForbidden, "insufficient_scope"},
	KindNotFound:          {fiber.StatusNotFound, "not_found"},
	KindInvalidRequest:    {fiber.StatusUnprocessableEntity, "invalid_request"},
	KindRateLimited:       {fiber.StatusTooManyRequests, "rate_limited"},
	KindOriginNotAllowed:  {fiber.StatusBadRequest, "origin_not_allowed"},
	KindUnavailable:       {fiber.StatusServiceUnavailable, "unavailable"},
}

// Error is an answer the contract defines. Message is shown to the client;
// Err (internal detail) is only logged.
type Error struct {
	Kind       Kind
	Message    string
	MergedInto string
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return kinds[e.Kind].code + ": " + e.Message + ": " + e.Err.Error()
	}
	return kinds[e.Kind].code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

func fail(kind Kind, msg string) *Error { return &Error{Kind: kind, Message: msg} }

// errorBody is {"error":{"code","message"[,"merged_into"]}}.
type errorBody struct {
	Error struct {
		Code       string `json:"code"`
		Message    string `json:"message"`
		MergedInto string `json:"merged_into,omitempty"`
	} `json:"error"`
}

// errorHandler writes every error as the contract's body. Anything that is
// not an *Error is logged with the request id and answered 503 unavailable:
// internal text never reaches a client, and there is no 500.
func errorHandler(log *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		var e *Error
		var fe *fiber.Error
		switch {
		case errors.As(err, &e):
		case errors.As(err, &fe) && (fe.Code == fiber.StatusNotFound || fe.Code == fiber.StatusMethodNotAllowed):
			e = fail(KindNotFound, "no such route: all routes are GET under /public/v1")
		case errors.As(err, &fe) && fe.Code < 500:
			e = fail(KindInvalidRequest, fe.Message)
		default:
			e = &Error{Kind: KindUnavailable, Message: "the request could not be served; try again", Err: err}
		}
		k := kinds[e.Kind]
		if e.Err != nil || e.Kind == KindUnavailable {
			log.Error("request failed", "request_id", requestID(c), "method", c.Method(), "path", c.Path(),
				"status", k.status, "err", err)
		}
		var body errorBody
		body.Error.Code, body.Error.Message, body.Error.MergedInto = k.code, e.Message, e.MergedInto
		switch e.Kind {
		case KindUnauthorized:
			c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="public-api"`)
		case KindRateLimited:
			c.Set(fiber.HeaderRetryAfter, ratelimit.Seconds(e.RetryAfter))
		case KindUnavailable:
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(1))
		}
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.Status(k.status).JSON(body)
	}
}

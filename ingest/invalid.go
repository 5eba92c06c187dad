package ingest

import (
	"fmt"
	"unicode/utf8"
)

// Reject reasons. A reason is one of these codes, then ": " and a detail.
const (
	ReasonBadJSON         = "bad_json"
	ReasonMissingField    = "missing_field"
	ReasonInvalidField    = "invalid_field"
	ReasonInvalidVersion  = "invalid_version"
	ReasonInvalidID       = "invalid_id"
	ReasonInvalidCategory = "invalid_category"
	ReasonInvalidStatus   = "invalid_status"
	ReasonInvalidSide     = "invalid_side"
	ReasonInvalidVenue    = "invalid_venue"
	ReasonPriceRange      = "price_out_of_range"
	ReasonInvalidSize     = "invalid_size"
	ReasonInvalidVolume   = "invalid_volume"
	ReasonInvalidTime     = "invalid_time"
	ReasonTextTooLong     = "text_too_long"
	ReasonInvalidMatch    = "invalid_match"
	ReasonSubject         = "invalid_subject"
	ReasonMaxDeliveries   = "max_deliveries"
)

// InvalidError says why a message cannot be applied. Reason is stored and
// published with the reject.
type InvalidError struct {
	Code   string
	Detail string
}

func (e *InvalidError) Error() string {
	if e.Detail == "" {
		return e.Code
	}
	return e.Code + ": " + e.Detail
}

func invalid(code, format string, args ...any) error {
	return &InvalidError{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// truncate shortens a value quoted in a reason to about 80 bytes, cutting
// at a character boundary so the reason stays valid UTF-8.
func truncate(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 80
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

package api

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"

	"github.com/marketdata/marketdata/store"
)

// Cursors are opaque to clients: base64url of a payload and its HMAC-SHA256
// (first 16 bytes) under MD_CURSOR_SECRET. The payload binds the route, the
// key's account and the filters, so a cursor replayed with other filters, on
// another route, by another account, or altered in any byte is refused.
// `limit` is not bound: a cursor may be replayed with another limit.

const (
	cursorVersion = "c1"
	cursorMACLen  = 16
	cursorSep     = 0x1f // unit separator: never in ids, categories or routes
)

var errBadCursor = errors.New("api: bad cursor")

// cursorBinding is what a cursor must match to be accepted.
type cursorBinding struct {
	route   string
	account string
	filters string
}

// filterKey is the canonical form of the /events filters; min_venues 1 and 2
// (and absent) are the same filter, as are min_confidence 0 and absent.
// The match filters add a part each only when set, so that the key of the
// other filters, and the cursors issued before the match filters existed,
// stay as they were. A confidence is written in the shortest form that
// reads back as the same float64: one text per distinct filter.
func filterKey(f store.ListFilter) string {
	minv := f.MinVenues
	if minv <= 2 {
		minv = 1
	}
	k := f.Category + "|" + f.Venue + "|" + strconv.Itoa(minv)
	if f.MinConfidence > 0 {
		k += "|c" + strconv.FormatFloat(f.MinConfidence, 'g', -1, 64)
	}
	if f.Relation != "" {
		k += "|r" + f.Relation
	}
	return k
}

func (b cursorBinding) payload(after string) []byte {
	var buf bytes.Buffer
	for i, part := range []string{cursorVersion, b.route, b.account, b.filters, after} {
		if i > 0 {
			buf.WriteByte(cursorSep)
		}
		buf.WriteString(part)
	}
	return buf.Bytes()
}

func cursorMAC(secret, payload []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(payload)
	return m.Sum(nil)[:cursorMACLen]
}

// encodeCursor returns the cursor that continues after the id after.
func encodeCursor(secret []byte, b cursorBinding, after string) string {
	p := b.payload(after)
	return base64.RawURLEncoding.EncodeToString(append(p, cursorMAC(secret, p)...))
}

// decodeCursor returns the id a cursor continues after, or errBadCursor.
func decodeCursor(secret []byte, b cursorBinding, cursor string) (string, error) {
	if len(cursor) > 512 {
		return "", errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	// The decoder skips CR and LF and ignores the unused low bits of the last
	// character, so several texts decode to one token: only the canonical
	// encoding is the cursor, any other text is an altered one.
	if err != nil || len(raw) <= cursorMACLen || base64.RawURLEncoding.EncodeToString(raw) != cursor {
		return "", errBadCursor
	}
	p, mac := raw[:len(raw)-cursorMACLen], raw[len(raw)-cursorMACLen:]
	if !hmac.Equal(mac, cursorMAC(secret, p)) {
		return "", errBadCursor
	}
	parts := bytes.Split(p, []byte{cursorSep})
	if len(parts) != 5 || string(parts[0]) != cursorVersion || string(parts[1]) != b.route ||
		string(parts[2]) != b.account || string(parts[3]) != b.filters || !store.ValidID(string(parts[4])) {
		return "", errBadCursor
	}
	return string(parts[4]), nil
}

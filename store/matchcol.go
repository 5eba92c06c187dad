package store

import (
	"encoding/json"
	"fmt"
)

// IsZero reports whether no venue has metadata: a document the matcher sent
// none for, stored as NULL.
func (m *Matches) IsZero() bool {
	return m == nil || *m == Matches{}
}

// encodeMatches is the matches column's value (migration 007) of a document
// with metadata: a JSON object of the venues that have some, in Venues order.
func encodeMatches(m *Matches) (string, error) {
	obj := make(map[string]*Match, len(m))
	for i, x := range m {
		if x != nil {
			obj[Venues[i]] = x
		}
	}
	b, err := json.Marshal(obj) // a map's keys are written sorted: Venues order
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// matchesCol scans the matches column: NULL is no metadata.
type matchesCol struct {
	m Matches
}

// Scan decodes the column's JSON text (pgx hands a copy of it as []byte).
func (c *matchesCol) Scan(src any) error {
	c.m = Matches{}
	var b []byte
	switch v := src.(type) {
	case nil:
		return nil
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		return fmt.Errorf("store: scan matches: unexpected %T", src)
	}
	var obj map[string]*Match
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("store: scan matches: %w", err)
	}
	for venue, x := range obj {
		i := VenueIndex(venue)
		if i < 0 {
			return fmt.Errorf("store: scan matches: unknown venue %q", venue)
		}
		c.m[i] = x
	}
	return nil
}

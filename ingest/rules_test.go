package ingest

import (
	"errors"
	"testing"
)

// TestRuleMessages pins the reject reasons of the id and category rules
// (store.ValidID, store.ValidCategory): moving the rules to store kept the
// text recorded with a reject.
func TestRuleMessages(t *testing.T) {
	cases := []struct {
		name, subject string
		body          body
		want          string
	}{
		{"subject id", testPrefix + ".event.a%b", eventBody(),
			`invalid_subject: subject id "a%b" does not match [A-Za-z0-9_-]{1,64}`},
		{"body id", testPrefix + ".trade.mk-1", tradeBody().with("trade_id", "a.b"),
			`invalid_id: trade_id "a.b" does not match [A-Za-z0-9_-]{1,64}`},
		{"category", testPrefix + ".event.ev-1", eventBody().with("category", "Politics"),
			`invalid_category: category "Politics" does not match [a-z0-9-]{1,32}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(testPrefix, c.subject, c.body.json())
			var ie *InvalidError
			if !errors.As(err, &ie) || err.Error() != c.want {
				t.Errorf("got %v, want %s", err, c.want)
			}
		})
	}
}

package api

import "testing"

// TestParamRuleMessages pins the 422 messages of the id and category rules
// (store.ValidID, store.ValidCategory): moving the rules to store kept the
// text users see.
func TestParamRuleMessages(t *testing.T) {
	if _, err := parseIDs("mk-1,a.b"); err == nil || err.Message != `ids holds a malformed market id "a.b": ids match [A-Za-z0-9_-]{1,64}` {
		t.Errorf("malformed id: got %v", err)
	}
	if _, err := parseListQuery("", "Politics", "", "", "", "", ""); err == nil || err.Message != "category must match [a-z0-9-]{1,32}" {
		t.Errorf("bad category: got %v", err)
	}
	if q, err := parseListQuery("", "us-politics", "", "", "", "", ""); err != nil || q.filter.Category != "us-politics" {
		t.Errorf("good category: got %+v, %v", q, err)
	}
}

package store

// The id and category rules of contract §4. Ingest refuses a message that
// breaks them and the API refuses a parameter that does (422), so both
// import these: one rule, checked the same way on the way in and out. They
// run for every id of every message and every snapshot poll, so they are
// byte loops rather than regexps; rules_test.go checks them against the
// patterns.

// IDPattern is the pattern of every universal, venue and trade id, as
// error messages quote it.
const IDPattern = "[A-Za-z0-9_-]{1,64}"

// MaxIDLen is the longest id IDPattern allows, in bytes.
const MaxIDLen = 64

// CategoryPattern is the pattern of an event's category.
const CategoryPattern = "[a-z0-9-]{1,32}"

// MaxCategoryLen is the longest category CategoryPattern allows, in bytes.
const MaxCategoryLen = 32

// ValidID reports whether s matches IDPattern.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidCategory reports whether s matches CategoryPattern.
func ValidCategory(s string) bool {
	if len(s) == 0 || len(s) > MaxCategoryLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

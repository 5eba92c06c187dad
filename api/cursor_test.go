package api

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/marketdata/marketdata/store"
)

// cwAlphabet is base64url's alphabet: every character a cursor may hold.
const cwAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

var (
	cwSecret  = []byte("cw-unit-secret-0123456789abcdef!")
	cwBinding = cursorBinding{route: "events", account: "acc_0123456789abcdef", filters: filterKey(store.ListFilter{})}
	// cwIDs are ids whose cursors cover every length modulo 3 of the payload,
	// so that every base64 tail shape (0, 2 and 3 trailing characters) occurs.
	cwIDs = []string{"a", "ab", "abc", "Z", "-", "_", "0", "a-b_C9", "A_", strings.Repeat("z", 63), strings.Repeat("Z-_9", 16)}
)

// cwMustDecode decodes a cursor that must be accepted and checks its id.
func cwMustDecode(t *testing.T, secret []byte, b cursorBinding, cursor, want string) {
	t.Helper()
	got, err := decodeCursor(secret, b, cursor)
	if err != nil {
		t.Fatalf("decodeCursor(%q) under %+v: %v, want %q", cursor, b, err, want)
	}
	if got != want {
		t.Fatalf("decodeCursor(%q) = %q, want %q", cursor, got, want)
	}
}

// cwMustRefuse checks that a cursor is refused with errBadCursor.
func cwMustRefuse(t *testing.T, secret []byte, b cursorBinding, cursor, why string) {
	t.Helper()
	got, err := decodeCursor(secret, b, cursor)
	if err == nil {
		t.Errorf("%s: decodeCursor(%.80q) accepted (id %q), want refused", why, cursor, got)
		return
	}
	if !errors.Is(err, errBadCursor) {
		t.Errorf("%s: decodeCursor(%.80q) = %v, want errBadCursor", why, cursor, err)
	}
	if got != "" {
		t.Errorf("%s: refused cursor still returned id %q", why, got)
	}
}

// cwRaw is a cursor's decoded bytes.
func cwRaw(t *testing.T, cursor string) []byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatalf("decode %q: %v", cursor, err)
	}
	return raw
}

func cwEncode(raw []byte) string { return base64.RawURLEncoding.EncodeToString(raw) }

// cwSigned signs an arbitrary payload the way encodeCursor does, so a test
// can forge a token whose MAC is right but whose content is not.
func cwSigned(secret, payload []byte) string {
	return cwEncode(append(bytes.Clone(payload), cursorMAC(secret, payload)...))
}

func TestCursorRoundTrip(t *testing.T) {
	bindings := []cursorBinding{
		cwBinding,
		{route: "events", account: "acc_x", filters: filterKey(store.ListFilter{Category: "politics", Venue: "venue_b", MinVenues: 3})},
		// The longest filters the parser admits.
		{route: "events", account: "acc_" + strings.Repeat("f", 32), filters: filterKey(store.ListFilter{Category: strings.Repeat("z", 32), Venue: "venue_d", MinVenues: 4})},
	}
	for _, b := range bindings {
		for _, id := range cwIDs {
			c := encodeCursor(cwSecret, b, id)
			if strings.Trim(c, cwAlphabet) != "" {
				t.Errorf("cursor %q holds characters outside base64url", c)
			}
			if len(c) > 512 {
				t.Errorf("cursor for %q under %+v is %d characters; decodeCursor refuses over 512", id, b, len(c))
			}
			cwMustDecode(t, cwSecret, b, c, id)
			if again := encodeCursor(cwSecret, b, id); again != c {
				t.Errorf("encodeCursor is not deterministic: %q then %q", c, again)
			}
		}
	}
}

// TestCursorTamperBytes flips every bit, and every whole byte, of the decoded
// token and re-encodes it: no altered token is accepted.
func TestCursorTamperBytes(t *testing.T) {
	for _, id := range cwIDs {
		raw := cwRaw(t, encodeCursor(cwSecret, cwBinding, id))
		for i := range raw {
			for _, mask := range []byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff} {
				alt := bytes.Clone(raw)
				alt[i] ^= mask
				cwMustRefuse(t, cwSecret, cwBinding, cwEncode(alt), "byte flip")
			}
		}
	}
}

// TestCursorTamperString alters the token as text: every character replaced
// by every other base64url character, CR/LF and padding inserted anywhere.
// Base64 decoders that ignore line breaks or the unused low bits of the last
// character would accept such tokens, though they differ in a byte.
func TestCursorTamperString(t *testing.T) {
	for _, id := range cwIDs {
		c := encodeCursor(cwSecret, cwBinding, id)
		for i := range len(c) {
			for j := range len(cwAlphabet) {
				if cwAlphabet[j] == c[i] {
					continue
				}
				cwMustRefuse(t, cwSecret, cwBinding, c[:i]+string(cwAlphabet[j])+c[i+1:], "character replaced at "+strconv.Itoa(i))
			}
		}
		for i := 0; i <= len(c); i++ {
			for _, ins := range []string{"\n", "\r", "\r\n", "=", " ", "+", "/", "%"} {
				cwMustRefuse(t, cwSecret, cwBinding, c[:i]+ins+c[i:], "inserted "+strconv.Quote(ins)+" at "+strconv.Itoa(i))
			}
		}
		cwMustRefuse(t, cwSecret, cwBinding, strings.ToUpper(c), "upper-cased")
		if std := base64.RawStdEncoding.EncodeToString(cwRaw(t, c)); std != c {
			cwMustRefuse(t, cwSecret, cwBinding, std, "standard alphabet")
		}
		if padded := base64.URLEncoding.EncodeToString(cwRaw(t, c)); padded != c {
			cwMustRefuse(t, cwSecret, cwBinding, padded, "padded")
		}
	}
}

func TestCursorTruncatedAndAppended(t *testing.T) {
	for _, id := range cwIDs {
		c := encodeCursor(cwSecret, cwBinding, id)
		for n := range len(c) {
			cwMustRefuse(t, cwSecret, cwBinding, c[:n], "text truncated")
			cwMustRefuse(t, cwSecret, cwBinding, c[len(c)-n:], "text cut at the front")
		}
		for j := range len(cwAlphabet) {
			cwMustRefuse(t, cwSecret, cwBinding, c+string(cwAlphabet[j]), "character appended")
		}
		cwMustRefuse(t, cwSecret, cwBinding, c+c, "token twice")
		raw := cwRaw(t, c)
		for n := range len(raw) {
			cwMustRefuse(t, cwSecret, cwBinding, cwEncode(raw[:n]), "bytes truncated")
		}
		for _, tail := range [][]byte{{0}, {0x1f}, {'a'}, raw[len(raw)-cursorMACLen:], []byte("\x1fa")} {
			cwMustRefuse(t, cwSecret, cwBinding, cwEncode(append(bytes.Clone(raw), tail...)), "bytes appended")
		}
		// The MAC moved: payload + something + MAC.
		p, mac := raw[:len(raw)-cursorMACLen], raw[len(raw)-cursorMACLen:]
		cwMustRefuse(t, cwSecret, cwBinding, cwEncode(append(append(bytes.Clone(p), 'x'), mac...)), "byte inserted before the MAC")
	}
}

// TestCursorFilters: a cursor is bound to its filters; min_venues absent, 1
// and 2 are one filter, everything else is another.
func TestCursorFilters(t *testing.T) {
	filters := []store.ListFilter{
		{},
		{Category: "politics"},
		{Category: "sports"},
		{Category: "politics", Venue: "venue_a"},
		{Venue: "venue_a"},
		{Venue: "venue_b"},
		{MinVenues: 3},
		{MinVenues: 4},
		{Category: "politics", MinVenues: 3},
		{Category: "politics", Venue: "venue_a", MinVenues: 4},
	}
	for i, fi := range filters {
		for j, fj := range filters {
			bi := cursorBinding{route: "events", account: "acc_1", filters: filterKey(fi)}
			bj := cursorBinding{route: "events", account: "acc_1", filters: filterKey(fj)}
			c := encodeCursor(cwSecret, bi, "Ab-9_")
			if i == j {
				cwMustDecode(t, cwSecret, bj, c, "Ab-9_")
			} else {
				cwMustRefuse(t, cwSecret, bj, c, "issued for "+filterKey(fi)+", replayed with "+filterKey(fj))
			}
		}
	}
	// min_venues absent, 1 and 2 mean the same, also combined with others.
	for _, base := range []store.ListFilter{{}, {Category: "politics"}, {Venue: "venue_c"}, {Category: "x-1", Venue: "venue_d"}} {
		for _, from := range []int{0, 1, 2} {
			for _, to := range []int{0, 1, 2} {
				fFrom, fTo := base, base
				fFrom.MinVenues, fTo.MinVenues = from, to
				c := encodeCursor(cwSecret, cursorBinding{route: "events", account: "acc_1", filters: filterKey(fFrom)}, "k")
				cwMustDecode(t, cwSecret, cursorBinding{route: "events", account: "acc_1", filters: filterKey(fTo)}, c, "k")
			}
			for _, to := range []int{3, 4} {
				fFrom, fTo := base, base
				fFrom.MinVenues, fTo.MinVenues = from, to
				c := encodeCursor(cwSecret, cursorBinding{route: "events", account: "acc_1", filters: filterKey(fFrom)}, "k")
				cwMustRefuse(t, cwSecret, cursorBinding{route: "events", account: "acc_1", filters: filterKey(fTo)}, c, "min_venues 1/2 replayed as 3/4")
			}
		}
	}
}

func TestCursorRouteAccountSecret(t *testing.T) {
	c := encodeCursor(cwSecret, cwBinding, "abc")
	other := cwBinding
	other.route = "account/keys"
	cwMustRefuse(t, cwSecret, other, c, "other route")
	cwMustRefuse(t, cwSecret, cwBinding, encodeCursor(cwSecret, other, "abc"), "issued on another route")
	other = cwBinding
	other.account = "acc_other"
	cwMustRefuse(t, cwSecret, other, c, "other account")
	other.account = cwBinding.account + "x"
	cwMustRefuse(t, cwSecret, other, c, "account with a suffix")
	other.account = cwBinding.account[:len(cwBinding.account)-1]
	cwMustRefuse(t, cwSecret, other, c, "account that is a prefix")
	other.account = ""
	cwMustRefuse(t, cwSecret, other, c, "no account")
	// Not K||0x00: HMAC pads short keys with zeros, so that key is K itself
	// (harmless: MD_CURSOR_SECRET is one fixed value per deployment).
	for _, s := range [][]byte{[]byte("another secret"), cwSecret[:len(cwSecret)-1], nil, append([]byte{0}, cwSecret...)} {
		cwMustRefuse(t, s, cwBinding, c, "other secret")
	}
}

// TestCursorForged covers tokens whose MAC is right under the secret but
// whose payload is not one encodeCursor writes: only the id check, the
// field count and the version stop them.
func TestCursorForged(t *testing.T) {
	sep := string(rune(cursorSep))
	head := cursorVersion + sep + cwBinding.route + sep + cwBinding.account + sep + cwBinding.filters + sep
	for _, after := range []string{"", "a b", "a/b", "a.b", "é", "a\x00", "a+b", strings.Repeat("a", 65), "a" + sep + "b"} {
		cwMustRefuse(t, cwSecret, cwBinding, cwSigned(cwSecret, []byte(head+after)), "signed bad id "+after)
	}
	body := cwBinding.route + sep + cwBinding.account + sep + cwBinding.filters + sep + "abc"
	for _, payload := range []string{
		"c2" + sep + body,
		"" + sep + body,
		body,
		head + "abc" + sep,
		head + "abc" + sep + "def",
		sep + head + "abc",
		"",
	} {
		cwMustRefuse(t, cwSecret, cwBinding, cwSigned(cwSecret, []byte(payload)), "signed bad payload "+payload)
	}
	// The check is not by accident: the same signing makes a good token.
	cwMustDecode(t, cwSecret, cwBinding, cwSigned(cwSecret, []byte(head+"abc")), "abc")
}

func TestCursorGarbage(t *testing.T) {
	cases := map[string]string{
		"empty":       "",
		"bangs":       "!!!",
		"10 KB":       strings.Repeat("A", 10*1024),
		"513 chars":   strings.Repeat("A", 513),
		"space":       " ",
		"null byte":   "\x00",
		"invalid utf": "\xff\xfe",
		"percent":     "%41%41%41%41",
		"padding":     "====",
		"json":        `{"after":"a"}`,
	}
	for name, c := range cases {
		cwMustRefuse(t, cwSecret, cwBinding, c, name)
	}
	// Valid base64 of random bytes, every length up to past the size limit.
	for n := 0; n < 400; n++ {
		b := make([]byte, n)
		rand.Read(b) // crypto/rand.Read never fails
		cwMustRefuse(t, cwSecret, cwBinding, cwEncode(b), "random bytes")
	}
	// A MAC of the right length on a payload that is the binding but an id
	// with a bad character, MAC random.
	sep := string(rune(cursorSep))
	p := []byte(cursorVersion + sep + "events" + sep + cwBinding.account + sep + cwBinding.filters + sep + "ab!c")
	mac := make([]byte, cursorMACLen)
	rand.Read(mac) // crypto/rand.Read never fails
	cwMustRefuse(t, cwSecret, cwBinding, cwEncode(append(p, mac...)), "bad id, random MAC")
	// The same with a good id and a random MAC of the right length.
	p = []byte(cursorVersion + sep + "events" + sep + cwBinding.account + sep + cwBinding.filters + sep + "abc")
	cwMustRefuse(t, cwSecret, cwBinding, cwEncode(append(p, mac...)), "good id, random MAC")
	// A full-length MAC alone, and a MAC one byte short.
	good := cwRaw(t, encodeCursor(cwSecret, cwBinding, "abc"))
	cwMustRefuse(t, cwSecret, cwBinding, cwEncode(good[len(good)-cursorMACLen:]), "MAC alone")
	cwMustRefuse(t, cwSecret, cwBinding, cwEncode(good[:len(good)-1]), "MAC one byte short")
}

// TestCursorFilterKey pins the canonical filter forms the cursor binds.
func TestCursorFilterKey(t *testing.T) {
	tests := []struct {
		f    store.ListFilter
		want string
	}{
		{store.ListFilter{}, "||1"},
		{store.ListFilter{MinVenues: 1}, "||1"},
		{store.ListFilter{MinVenues: 2}, "||1"},
		{store.ListFilter{MinVenues: 3}, "||3"},
		{store.ListFilter{MinVenues: 4}, "||4"},
		{store.ListFilter{Category: "politics", Venue: "venue_b", MinVenues: 2}, "politics|venue_b|1"},
	}
	for _, tt := range tests {
		if got := filterKey(tt.f); got != tt.want {
			t.Errorf("filterKey(%+v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}

// cwWantInvalid checks a parser's refusal: a 422 invalid_request whose
// message names the parameter.
func cwWantInvalid(t *testing.T, err *Error, param, input string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s=%.80q accepted, want invalid_request", param, input)
		return
	}
	if err.Kind != KindInvalidRequest {
		t.Errorf("%s=%.80q: kind %v, want KindInvalidRequest", param, input, err.Kind)
	}
	if !strings.Contains(err.Message, param) {
		t.Errorf("%s=%.80q: message %q does not name %s", param, input, err.Message, param)
	}
}

// cwDistinctFrom reports whether s shares no bytes with the memory of raw:
// parsed values must be copies, since Fiber reuses query strings.
func cwDistinctFrom(s, raw string) bool {
	if len(s) == 0 || len(raw) == 0 {
		return true
	}
	sp, rp := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(raw)))
	return sp+uintptr(len(s)) <= rp || rp+uintptr(len(raw)) <= sp
}

func TestParseLimit(t *testing.T) {
	ok := []struct {
		raw      string
		def, max int
		want     int
	}{
		{"", 50, 100, 50},
		{"", 20, 50, 20},
		{"1", 50, 100, 1},
		{"100", 50, 100, 100},
		{"50", 20, 50, 50},
		{"200", 50, 200, 200},
		{"007", 50, 100, 7},
		{"000100", 50, 100, 100},
	}
	for _, tt := range ok {
		got, err := parseLimit(tt.raw, tt.def, tt.max)
		if err != nil || got != tt.want {
			t.Errorf("parseLimit(%q, %d, %d) = %d, %v; want %d", tt.raw, tt.def, tt.max, got, err, tt.want)
		}
	}
	for _, raw := range []string{"0", "101", "-1", "+1", " 1", "1 ", "1.0", "1e2", "0x10", "one", "١", "１",
		"9999999", "99999999999999999999", "0000000001", "1,2", "\x00", "%31", "000000"} {
		got, err := parseLimit(raw, 50, 100)
		if got != 0 {
			t.Errorf("parseLimit(%q) = %d with an error, want 0", raw, got)
		}
		cwWantInvalid(t, err, "limit", raw)
		if err != nil && !strings.Contains(err.Message, "1 to 100") {
			t.Errorf("parseLimit(%q): message %q does not give the range", raw, err.Message)
		}
	}
}

func TestParseIDs(t *testing.T) {
	ok := []struct {
		raw  string
		want []string
	}{
		{"a", []string{"a"}},
		{"b,a,b,c,a", []string{"b", "a", "c"}},
		{"A,a,_,-,0", []string{"A", "a", "_", "-", "0"}},
		{"x,x,x,x", []string{"x"}},
		{strings.Repeat("z", 64), []string{strings.Repeat("z", 64)}},
	}
	for _, tt := range ok {
		got, err := parseIDs(tt.raw)
		if err != nil || strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("parseIDs(%q) = %q, %v; want %q", tt.raw, got, err, tt.want)
		}
		for _, id := range got {
			if !cwDistinctFrom(id, tt.raw) {
				t.Errorf("parseIDs(%q): %q shares the query's memory; want a copy", tt.raw, id)
			}
		}
	}

	distinct := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "m-" + strconv.Itoa(i)
		}
		return out
	}
	fifty := distinct(50)
	if got, err := parseIDs(strings.Join(fifty, ",")); err != nil || len(got) != 50 {
		t.Errorf("50 distinct ids: %d ids, %v; want all 50", len(got), err)
	}
	// 50 distinct with many duplicates is still 50.
	dup := strings.Join(append(append(slicesClone(fifty), fifty...), fifty...), ",")
	if got, err := parseIDs(dup); err != nil || strings.Join(got, ",") != strings.Join(fifty, ",") {
		t.Errorf("50 distinct ids three times: %d ids, %v; want the 50 in order", len(got), err)
	}
	// 50 distinct ids of the longest length, each repeated: near the size cap.
	long := make([]string, 50)
	for i := range long {
		long[i] = strconv.Itoa(i) + strings.Repeat("L", 64-len(strconv.Itoa(i)))
	}
	if got, err := parseIDs(strings.Join(long, ",")); err != nil || len(got) != 50 {
		t.Errorf("50 ids of 64 characters: %d ids, %v", len(got), err)
	}

	bad := map[string]string{
		"empty":             "",
		"only comma":        ",",
		"leading comma":     ",a",
		"trailing comma":    "a,",
		"empty middle":      "a,,b",
		"space":             "a b",
		"space after comma": "a, b",
		"dot":               "a.b",
		"slash":             "a/b",
		"percent":           "a%20b",
		"plus":              "a+b",
		"non-ascii":         "é",
		"null":              "a\x00",
		"invalid utf-8":     "a\xff",
		"65 characters":     strings.Repeat("z", 65),
		"5000 characters":   "a," + strings.Repeat("z", 5000),
		"51 distinct":       strings.Join(distinct(51), ","),
		"51 distinct, dups": strings.Join(append(distinct(51), distinct(51)...), ","),
		"500 distinct":      strings.Join(distinct(500), ","),
		"bad after 50":      strings.Join(fifty, ",") + ",!",
		"over 64 KiB":       strings.Repeat("a,", 32*1024) + "a",
		"1 MiB":             strings.Repeat("a", 1<<20),
	}
	for name, raw := range bad {
		got, err := parseIDs(raw)
		if got != nil {
			t.Errorf("%s: parseIDs returned %d ids with an error", name, len(got))
		}
		cwWantInvalid(t, err, "ids", raw)
		if err != nil && len(err.Message) > 300 {
			t.Errorf("%s: message is %d bytes; a long id must be truncated in it", name, len(err.Message))
		}
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func TestParseListQuery(t *testing.T) {
	ok := []struct {
		limit, category, venue, minVenues, cursor string
		want                                      listQuery
	}{
		{"", "", "", "", "", listQuery{limit: 50}},
		{"1", "", "", "", "", listQuery{limit: 1}},
		{"100", "", "", "", "", listQuery{limit: 100}},
		{"7", "politics", "", "", "", listQuery{limit: 7, filter: store.ListFilter{Category: "politics"}}},
		{"", "a", "venue_a", "", "", listQuery{limit: 50, filter: store.ListFilter{Category: "a", Venue: "venue_a"}}},
		{"", strings.Repeat("z", 32), "venue_d", "4", "CUR", listQuery{limit: 50, cursor: "CUR",
			filter: store.ListFilter{Category: strings.Repeat("z", 32), Venue: "venue_d", MinVenues: 4}}},
		{"", "0-9-", "venue_b", "1", "", listQuery{limit: 50, filter: store.ListFilter{Category: "0-9-", Venue: "venue_b", MinVenues: 1}}},
		{"", "", "venue_c", "2", "", listQuery{limit: 50, filter: store.ListFilter{Venue: "venue_c", MinVenues: 2}}},
		{"", "", "", "3", "", listQuery{limit: 50, filter: store.ListFilter{MinVenues: 3}}},
	}
	for _, tt := range ok {
		got, err := parseListQuery(tt.limit, tt.category, tt.venue, tt.minVenues, "", "", tt.cursor)
		if err != nil || got != tt.want {
			t.Errorf("parseListQuery(%q, %q, %q, %q, %q) = %+v, %v; want %+v",
				tt.limit, tt.category, tt.venue, tt.minVenues, tt.cursor, got, err, tt.want)
			continue
		}
		for _, pair := range [][2]string{{got.filter.Category, tt.category}, {got.filter.Venue, tt.venue}, {got.cursor, tt.cursor}} {
			if !cwDistinctFrom(pair[0], pair[1]) {
				t.Errorf("parseListQuery keeps %q in the query's memory; want a copy", pair[0])
			}
		}
	}
	// min_venues 1, 2 and absent bind the same cursors.
	keys := map[string]bool{}
	for _, mv := range []string{"", "1", "2"} {
		q, err := parseListQuery("", "", "venue_a", mv, "", "", "")
		if err != nil {
			t.Fatalf("min_venues=%q: %v", mv, err)
		}
		keys[filterKey(q.filter)] = true
	}
	if len(keys) != 1 {
		t.Errorf("min_venues absent, 1, 2 give filter keys %v; want one", keys)
	}

	bad := []struct{ param, limit, category, venue, minVenues string }{
		{"limit", "0", "", "", ""},
		{"limit", "101", "", "", ""},
		{"limit", "x", "", "", ""},
		{"limit", "-5", "", "", ""},
		{"category", "", "Politics", "", ""},
		{"category", "", "pol itics", "", ""},
		{"category", "", "pol_itics", "", ""},
		{"category", "", "pölitics", "", ""},
		{"category", "", strings.Repeat("z", 33), "", ""},
		{"category", "", "a|b", "", ""},
		{"category", "", "a\x1fb", "", ""},
		{"venue", "", "", "venue_e", ""},
		{"venue", "", "", sentEmpty, ""},
		{"category", "", sentEmpty, "", ""},
		{"venue", "", "", "VENUE_A", ""},
		{"venue", "", "", "venue_a ", ""},
		{"venue", "", "", "a", ""},
		{"venue", "", "", "*", ""},
		{"min_venues", "", "", "", "0"},
		{"min_venues", "", "", "", "5"},
		{"min_venues", "", "", "", "-1"},
		{"min_venues", "", "", "", "2.0"},
		{"min_venues", "", "", "", "two"},
		{"min_venues", "", "", "", " 3"},
		{"min_venues", "", "", "", "9999999"},
	}
	for _, tt := range bad {
		_, err := parseListQuery(tt.limit, tt.category, tt.venue, tt.minVenues, "", "", "")
		cwWantInvalid(t, err, tt.param, tt.limit+tt.category+tt.venue+tt.minVenues)
	}
}

func TestParseSearch(t *testing.T) {
	ok := []struct {
		q, limit string
		wantN    int
	}{
		{"", "", 20},
		{"fed", "", 20},
		{"fed", "1", 1},
		{"fed", "50", 50},
		{strings.Repeat("a", 100), "", 20},
		{strings.Repeat("é", 100), "", 20}, // 200 bytes, 100 characters
		{strings.Repeat("日", 100), "", 20}, // 300 bytes
		{strings.Repeat("🎉", 100), "", 20}, // 400 bytes
		{"%_*?\\'\"", "", 20},
	}
	for _, tt := range ok {
		sq, err := parseSearch(tt.q, tt.limit, "", "")
		q, n := sq.q, sq.limit
		if err != nil || q != tt.q || n != tt.wantN {
			t.Errorf("parseSearch(%.20q, %q) = %.20q, %d, %v; want %.20q, %d", tt.q, tt.limit, q, n, err, tt.q, tt.wantN)
		}
		if !cwDistinctFrom(q, tt.q) {
			t.Errorf("parseSearch(%.20q) keeps the query's memory; want a copy", tt.q)
		}
	}
	bad := []struct{ param, q, limit string }{
		{"q", strings.Repeat("a", 101), ""},
		{"q", strings.Repeat("é", 101), ""},
		{"q", strings.Repeat("🎉", 101), ""},
		{"q", strings.Repeat("a", 99) + "é" + "b", ""},
		{"q", "\xff", ""},
		{"q", "fed\xc3", ""},
		{"q", "\xed\xa0\x80", ""}, // a UTF-16 surrogate encoded in UTF-8
		{"q", strings.Repeat("a", 50) + "\x80", ""},
		{"q", strings.Repeat("a", 10000), ""},
		{"limit", "fed", "0"},
		{"limit", "fed", "51"},
		{"limit", "fed", "x"},
		{"limit", "", "-1"},
	}
	for _, tt := range bad {
		sq, err := parseSearch(tt.q, tt.limit, "", "")
		q, n := sq.q, sq.limit
		if q != "" || n != 0 {
			t.Errorf("parseSearch(%.20q, %q) refused but returned %.20q, %d", tt.q, tt.limit, q, n)
		}
		cwWantInvalid(t, err, tt.param, tt.q+" "+tt.limit)
	}
}

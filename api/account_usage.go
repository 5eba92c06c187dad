package api

import (
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/api/usage"
	"github.com/marketdata/marketdata/store"
)

// Usage listing limits (contract §3).
const (
	// usageDefaultDays is how far back from defaults to: from is today
	// minus 30 days.
	usageDefaultDays = 30
	// usageMaxDays is the most days one query may span, from and to
	// included.
	usageMaxDays = 366
	dateLayout   = "2006-01-02"
)

// usageQuery is the parsed query of GET /account/usage. rawFrom and rawTo
// are the dates as sent ("" when absent): the cursor is bound to them, not
// to the defaults they resolve to, so a walk with the defaults goes on
// across midnight.
type usageQuery struct {
	route          string
	from, to       time.Time
	rawFrom, rawTo string
	limit          int
	cursor         string
}

// parseDate reads a YYYY-MM-DD date, nothing else.
func parseDate(name, raw string) (time.Time, *Error) {
	t, err := time.Parse(dateLayout, raw)
	if len(raw) != len(dateLayout) || err != nil {
		return time.Time{}, invalidParam(name + " must be a date as YYYY-MM-DD")
	}
	return t, nil
}

// parseUsageQuery reads limit, route, from, to and cursor; today is the
// node's UTC date.
func parseUsageQuery(limit, route, from, to, cursor string, today time.Time) (usageQuery, *Error) {
	var q usageQuery
	var err *Error
	if q.limit, err = parseLimit(limit, 50, 100); err != nil {
		return q, err
	}
	if route != "" {
		r, ok := usage.ParseRoute(route)
		if !ok {
			return q, invalidParam("route must be one of key, events, event, search, snapshot, trades, account_keys, account_usage, stream")
		}
		q.route = r.String() // not Fiber's borrowed bytes
	}
	q.from, q.to = today.AddDate(0, 0, -usageDefaultDays), today
	if from != "" {
		if q.from, err = parseDate("from", from); err != nil {
			return q, err
		}
		q.rawFrom = q.from.Format(dateLayout)
	}
	if to != "" {
		if q.to, err = parseDate("to", to); err != nil {
			return q, err
		}
		q.rawTo = q.to.Format(dateLayout)
	}
	switch {
	case q.from.After(q.to):
		return q, invalidParam("from (" + q.from.Format(dateLayout) + ") is after to (" + q.to.Format(dateLayout) + "); from defaults to 30 days ago, to to today (UTC)")
	case q.to.Sub(q.from) >= usageMaxDays*24*time.Hour:
		return q, invalidParam("from " + q.from.Format(dateLayout) + " to " + q.to.Format(dateLayout) + " spans more than 366 days")
	}
	q.cursor = strings.Clone(cursor)
	return q, nil
}

// usagePosition is where a usage page ends, as a cursor holds it:
// "YYYY-MM-DD_route" (an id as the cursor expects one: the date is fixed
// width, so the route is all that follows its underscore).
func usagePosition(c store.UsageCount) string {
	return c.Day.Format(dateLayout) + "_" + c.Route
}

// parseUsagePosition reads usagePosition; ok is false for anything else.
func parseUsagePosition(p string) (day time.Time, route string, ok bool) {
	if len(p) <= len(dateLayout)+1 || p[len(dateLayout)] != '_' {
		return time.Time{}, "", false
	}
	day, err := time.Parse(dateLayout, p[:len(dateLayout)])
	route = p[len(dateLayout)+1:]
	_, known := usage.ParseRoute(route)
	return day, route, err == nil && known
}

// usageItem is one row of the answer.
type usageItem struct {
	Date  string `json:"date"`
	Route string `json:"route"`
	Count int64  `json:"count"`
}

// accountUsage answers GET /account/usage: the caller's account's requests
// per UTC day and route, ascending by date then route, walked with a
// cursor. It reads the primary, where the nodes' flushes land: a request
// is listed within the flush interval and the commit (contract: 5 s).
func (s *Server) accountUsage(c *fiber.Ctx) error {
	today := usage.Day(s.now())
	q, perr := parseUsageQuery(param(c, "limit"), param(c, "route"), param(c, "from"), param(c, "to"), c.Query("cursor"), today)
	cred := credential(c)
	if cred == nil {
		return errNoCredential
	}
	binding := cursorBinding{route: "account_usage", account: cred.Account.ID, filters: q.route + "|" + q.rawFrom + "|" + q.rawTo}
	var afterDay time.Time
	var afterRoute string
	if perr == nil && q.cursor != "" {
		after, err := decodeCursor(s.cfg.CursorSecret, binding, q.cursor)
		var ok bool
		if err == nil {
			afterDay, afterRoute, ok = parseUsagePosition(after)
		}
		if !ok {
			perr = invalidParam("cursor is malformed, altered, or was issued for other filters, another route or another account")
		}
	}
	if err := s.admit(c); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	rows, err := s.usage.List(c.UserContext(), store.UsageQuery{
		AccountID: cred.Account.ID, Route: q.route, From: q.from, To: q.to,
		AfterDay: afterDay, AfterRoute: afterRoute, Limit: q.limit + 1,
	})
	if err != nil {
		return &Error{Kind: KindUnavailable, Message: "usage cannot be read right now; try again", Err: err}
	}
	var next []byte
	if len(rows) > q.limit {
		rows = rows[:q.limit]
		next = []byte(strconv.Quote(encodeCursor(s.cfg.CursorSecret, binding, usagePosition(rows[len(rows)-1]))))
	}
	items := make([][]byte, len(rows))
	for i, r := range rows {
		b, err := marshalJSON(usageItem{Date: r.Day.Format(dateLayout), Route: r.Route, Count: r.Count})
		if err != nil {
			return err
		}
		items[i] = b
	}
	return sendList(c, items, next, true)
}

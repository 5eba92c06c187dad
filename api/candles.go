package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// Candles reads a market's candles from Postgres (store.ReplicaReads in
// production: the read replica, the primary while it is down).
type Candles interface {
	Candles(ctx context.Context, marketID, interval, series string, from, to time.Time) ([]store.Candle, error)
}

var (
	_ Candles = (*store.Store)(nil)
	_ Candles = (*store.ReplicaReads)(nil)
)

// defaultCandles is how many intervals the range holds when from is absent.
const defaultCandles = 500

// candleQuery is a candles request's parameters, checked: start is the
// aligned start of the first bucket and n how many buckets it asks for.
type candleQuery struct {
	interval, venue string
	start           time.Time
	n               int
}

// parseCandleQuery reads interval, from, to and venue (contract §3,
// candles); now is the default to.
func parseCandleQuery(interval, from, to, venue string, now time.Time) (candleQuery, *Error) {
	var q candleQuery
	if interval == "" {
		interval = "1h"
	}
	step, ok := store.CandleStep(interval)
	if !ok {
		return q, invalidParam("interval must be one of 1m, 5m, 15m, 1h, 4h, 1d")
	}
	q.interval = strings.Clone(interval)
	switch venue {
	case "", "all":
		q.venue = "all"
	default:
		for _, v := range store.Venues {
			if v == venue {
				q.venue = v
			}
		}
		if q.venue == "" {
			return q, invalidParam("venue must be one of venue_a, venue_b, venue_c, venue_d, all")
		}
	}
	end := now.UTC()
	if to != "" {
		t, err := time.Parse(time.RFC3339, to)
		if err != nil {
			return q, invalidParam("to must be an RFC 3339 time, such as 2024-05-01T00:00:00Z")
		}
		end = t.UTC()
	}
	begin := end.Add(-defaultCandles * step)
	if from != "" {
		t, err := time.Parse(time.RFC3339, from)
		if err != nil {
			return q, invalidParam("from must be an RFC 3339 time, such as 2024-05-01T00:00:00Z")
		}
		begin = t.UTC()
	}
	if !begin.Before(end) {
		return q, invalidParam("from must be before to")
	}
	q.start, q.n = candleSpan(step, begin, end)
	if q.n > store.MaxCandles {
		return q, invalidParam(fmt.Sprintf("from and to hold %d candles of %s; at most %d are answered: narrow the range or take a longer interval",
			q.n, interval, store.MaxCandles))
	}
	return q, nil
}

// candleSpan is store.CandleBuckets counted in seconds: a range of years
// (RFC 3339 allows 0000 to 9999) is past what a time.Duration holds, and
// its count must still be right in the 422's message.
func candleSpan(step time.Duration, from, to time.Time) (time.Time, int) {
	start := from.Truncate(step)
	secs := to.Unix() - start.Unix()
	if to.Nanosecond() > 0 {
		secs++
	}
	s := int64(step / time.Second)
	return start, int((secs + s - 1) / s)
}

// candles answers GET /markets/{universal_id}/candles: from node memory
// when it holds the answer, else from Postgres, kept until a change notice
// names the market.
func (s *Server) candles(c *fiber.Ctx) error {
	id := strings.Clone(c.Params("universal_id"))
	q, perr := parseCandleQuery(param(c, "interval"), param(c, "from"), param(c, "to"), param(c, "venue"), s.now())
	if err := s.admit(c); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if !store.ValidID(id) {
		return fail(KindNotFound, "no market has this id")
	}
	ctx := c.UserContext()
	items, err := s.reader.Prices(ctx, []string{id})
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return fail(KindNotFound, "no served market has this id")
	case err != nil:
		return readFailed(err)
	case !items[0].Found || !items[0].Served:
		return fail(KindNotFound, "no served market has this id")
	}
	key := candleKey{market: id, interval: q.interval, venue: q.venue, start: q.start.Unix(), n: q.n}
	if a, ok := s.candleMemo.get(key); ok {
		return sendTagged(c, a.body, a.tag)
	}
	// One read of Postgres a key at a time: the requests that miss while
	// it runs share its answer (a chart polled by many clients would
	// otherwise send them all to Postgres each time the answer expires).
	v, err, _ := s.candleMemo.fills.Do(key.String(), func() (any, error) {
		gen := s.candleMemo.generation(id)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), candleReadTimeout)
		defer cancel()
		step, _ := store.CandleStep(q.interval)
		list, err := s.candleStore.Candles(rctx, id, q.interval, q.venue, q.start, q.start.Add(time.Duration(q.n)*step))
		if err != nil {
			return nil, err
		}
		body, err := marshalJSON(struct {
			Data []store.Candle `json:"data"`
		}{list})
		if err != nil {
			return nil, err
		}
		a := candleAnswer{body: body, tag: bodyTag(body)}
		s.candleMemo.put(key, a, gen)
		return a, nil
	})
	if err != nil {
		return readFailed(err)
	}
	a := v.(candleAnswer)
	return sendTagged(c, a.body, a.tag)
}

// candleReadTimeout bounds a candle read of Postgres that requests share (it
// outlives the request that started it).
const candleReadTimeout = 10 * time.Second

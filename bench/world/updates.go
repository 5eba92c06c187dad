package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"

	"github.com/marketdata/marketdata/bench/measure"
)

// PollPrice is update n of the schedule as the matcher message of contract
// §4 (md.v1.price.<market_id>): the market's quotes in the loaded world
// (prices, by market index), on the same venues, moved by a few cents that
// vary with the version, so an answer keeps its size while its content
// changes.
func PollPrice(prices []store.Price, sched *UpdateSchedule, subjectPrefix string, n int) *Outgoing {
	m, v := sched.Market[n], sched.Version[n]
	base := prices[m]
	quotes := make(map[string]store.Quote, len(base.Quotes))
	k := 0
	for venue, q := range base.Quotes {
		shift := 0.01 * float64((int(v)+k)%5-2)
		k++
		nq := q
		if q.Bid != nil && q.Ask != nil {
			bid := clamp01(*q.Bid+shift, 0.01, 0.97)
			ask := clamp01(*q.Ask+shift, bid+0.01, 0.99)
			last := cents(bid + (ask-bid)/2)
			nq.Bid, nq.Ask, nq.Last = &bid, &ask, &last
		}
		nq.Volume24h = q.Volume24h + float64(v)
		quotes[venue] = nq
	}
	ts := time.Now().UTC().Truncate(time.Microsecond)
	data, err := json.Marshal(priceWire{MarketID: base.MarketID, Version: v, TS: ts.Format(wireTime), Quotes: quotes})
	if err != nil {
		panic(fmt.Sprintf("mdbench: encode price %s: %v", base.MarketID, err)) // plain strings and finite numbers only
	}
	return &Outgoing{
		Subject: subjectPrefix + "." + ingest.KindPrice + "." + base.MarketID,
		Data:    data,
		MsgID:   "poll." + base.MarketID + "." + strconv.FormatInt(v, 10),
	}
}

func clamp01(v, lo, hi float64) float64 { return cents(math.Max(lo, math.Min(hi, v))) }

// PollPublish is what the publisher did over the whole benchmark.
type PollPublish struct {
	Planned  int     `json:"planned_max"`
	Sent     int64   `json:"sent"`
	Seconds  float64 `json:"seconds"`
	Rate     float64 `json:"achieved_rate_per_s"`
	Target   float64 `json:"target_rate_per_s"`
	Exhaust  bool    `json:"ran_out_of_plan"`
	StopNote string  `json:"stop,omitempty"`
}

// PublishPolls publishes the schedule's updates at rate until ctx ends and
// reports what it sent; sched records each publish time.
func PublishPolls(ctx context.Context, pub *Publisher, prices []store.Price, sched *UpdateSchedule, subjectPrefix string, rate float64) (PollPublish, error) {
	first, last, err := pub.PublishPacedFunc(ctx, len(sched.Market), rate, func(n int) *Outgoing {
		return PollPrice(prices, sched, subjectPrefix, n)
	}, sched.Published)
	r := PollPublish{Planned: len(sched.Market), Sent: pub.Sent.Load(), Target: rate}
	if el := last.Sub(first); el > 0 {
		r.Seconds = measure.Round2(el.Seconds())
		r.Rate = measure.Round2(float64(r.Sent-1) / el.Seconds())
	}
	switch {
	case err == nil:
		r.Exhaust = true
	case errors.Is(err, context.Canceled):
		r.StopNote = "stopped at the end of the rounds"
	default:
		return r, err
	}
	return r, nil
}

package world

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"

	"github.com/marketdata/marketdata/bench/measure"
)

// The candle history of the reads world (issue 20): a few markets get 1–3
// price updates and 2–8 trades an hour over the CandleHours hours before
// the hour the world was made in, published as matcher messages
// (contract §4) and applied by a `marketdata ingest` child, so the candles
// the route reads are the ones ingest derived. The route reads the first of
// them: CandleHours 1h candles, from and to fixed, so the bare baseline
// serves the same bytes.
const (
	CandleHours   = 500
	CandleMarkets = 10
	// candleTradesMin and candleTradesMax bound a market's trades an hour,
	// candlePricesMin and candlePricesMax its price updates.
	candleTradesMin, candleTradesMax = 2, 8
	candlePricesMin, candlePricesMax = 1, 3
)

// CandleWindow is the hour-aligned range the route asks for: the
// CandleHours whole hours before the hour that holds at. With at the
// world's time (ReadsWorld.At), the loaded prices' points fall after it.
func CandleWindow(at time.Time) (from, to time.Time) {
	to = at.UTC().Truncate(time.Hour)
	return to.Add(-CandleHours * time.Hour), to
}

// CandlePath is the request of the reads benchmark's candles route.
func CandlePath(market string, from, to time.Time) string {
	q := url.Values{"interval": {"1h"}, "from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}}
	return "/public/v1/markets/" + market + "/candles?" + q.Encode()
}

// CandleHistory is the candle seeding's messages, in publish order (by ts
// within each market: versions grow with ts), and what they hold.
type CandleHistory struct {
	// Markets are the markets' ids; From and To bound every message's ts;
	// Prefix is the subjects' prefix.
	Markets  []string
	From, To time.Time
	Prefix   string
	Msgs     []Outgoing
	// Trades and Prices count the messages by market id.
	Trades, Prices map[string]int
}

// tradeWire is the body of md.v1.trade.<market_id>.
type tradeWire struct {
	MarketID string  `json:"market_id"`
	TradeID  string  `json:"trade_id"`
	Venue    string  `json:"venue"`
	Price    float64 `json:"price"`
	Size     float64 `json:"size"`
	Side     string  `json:"side"`
	TS       string  `json:"ts"`
}

// NewCandleHistory builds the history of the markets ids of w over [from,
// to), under subjectPrefix, the same for the same arguments. The markets'
// loaded prices are version 1; the history's go on from version 2, each
// market's mid a random walk on the venues it is quoted on.
func NewCandleHistory(w *ReadsWorld, ids []string, from, to time.Time, subjectPrefix string, seed uint64) (*CandleHistory, error) {
	want := make(map[string]int, len(ids))
	for _, id := range ids {
		want[id] = -1
	}
	for i := range w.Markets {
		if _, ok := want[w.Markets[i].ID]; ok {
			want[w.Markets[i].ID] = i
		}
	}
	h := &CandleHistory{Markets: ids, From: from, To: to, Prefix: subjectPrefix, Trades: map[string]int{}, Prices: map[string]int{}}
	for k, id := range ids {
		i := want[id]
		if i < 0 {
			return nil, fmt.Errorf("candle history: no market %s in the world", id)
		}
		r := rand.New(rand.NewPCG(seed, uint64(k)))
		h.market(r, w.Prices[i], from, to, subjectPrefix)
	}
	return h, nil
}

// candleState is a market's quotes as the history moves them.
type candleState struct {
	venues  []string
	spreads []float64
	quotes  map[string]store.Quote
	mid     float64
	version int64
}

// market appends one market's messages over [from, to), hour by hour.
func (h *CandleHistory) market(r *rand.Rand, base store.Price, from, to time.Time, prefix string) {
	s := candleState{venues: slices.Sorted(maps.Keys(base.Quotes)), version: base.Version}
	for _, v := range s.venues {
		q := base.Quotes[v]
		s.spreads = append(s.spreads, math.Max(0.01, cents(*q.Ask-*q.Bid)))
		s.mid += (*q.Bid + *q.Ask) / 2 / float64(len(base.Quotes))
	}
	s.requote(base)
	type due struct {
		at    time.Duration
		trade bool
	}
	for hour := from; hour.Before(to); hour = hour.Add(time.Hour) {
		var dues []due
		for range candlePricesMin + r.IntN(candlePricesMax-candlePricesMin+1) {
			dues = append(dues, due{at: time.Duration(r.Int64N(int64(time.Hour)))})
		}
		for range candleTradesMin + r.IntN(candleTradesMax-candleTradesMin+1) {
			dues = append(dues, due{at: time.Duration(r.Int64N(int64(time.Hour))), trade: true})
		}
		slices.SortStableFunc(dues, func(a, b due) int { return cmp.Compare(a.at, b.at) })
		for _, d := range dues {
			ts := hour.Add(d.at).Truncate(time.Microsecond)
			if d.trade {
				h.Msgs = append(h.Msgs, s.trade(r, base.MarketID, h.Trades[base.MarketID], ts, prefix))
				h.Trades[base.MarketID]++
				continue
			}
			s.mid = math.Max(0.03, math.Min(0.97, s.mid+0.015*r.NormFloat64()))
			s.requote(base)
			s.version++
			h.Msgs = append(h.Msgs, s.price(base, ts, prefix))
			h.Prices[base.MarketID]++
		}
	}
}

// requote quotes every venue around mid with its loaded spread.
func (s *candleState) requote(base store.Price) {
	s.quotes = make(map[string]store.Quote, len(s.venues))
	for k, v := range s.venues {
		bid := clamp01(s.mid-s.spreads[k]/2, 0.01, 0.97)
		ask := clamp01(bid+s.spreads[k], bid+0.01, 0.99)
		last := cents(bid + (ask-bid)/2)
		s.quotes[v] = store.Quote{Bid: &bid, Ask: &ask, Last: &last, Volume24h: base.Quotes[v].Volume24h}
	}
}

func (s *candleState) price(base store.Price, ts time.Time, prefix string) Outgoing {
	return encodeOutgoing(prefix, ingest.KindPrice, base.MarketID,
		"candles.price."+base.MarketID+"."+strconv.FormatInt(s.version, 10),
		priceWire{MarketID: base.MarketID, Version: s.version, TS: ts.Format(wireTime), Quotes: s.quotes})
}

// trade is a taker order on one venue: a buy at its ask, a sell at its bid.
func (s *candleState) trade(r *rand.Rand, market string, n int, ts time.Time, prefix string) Outgoing {
	v := s.venues[r.IntN(len(s.venues))]
	q := s.quotes[v]
	side, price := "buy", *q.Ask
	if r.IntN(2) == 0 {
		side, price = "sell", *q.Bid
	}
	id := fmt.Sprintf("bt_%s_%05d", market, n)
	return encodeOutgoing(prefix, ingest.KindTrade, market, "candles.trade."+id, tradeWire{
		MarketID: market, TradeID: id, Venue: v, Price: price,
		Size: math.Max(1, math.Round(math.Exp(2.5+1.3*r.NormFloat64()))), Side: side, TS: ts.Format(wireTime),
	})
}

func encodeOutgoing(prefix, kind, id, msgID string, body any) Outgoing {
	data, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("mdbench: encode %s %s: %v", kind, id, err)) // plain strings and finite numbers only
	}
	return Outgoing{Subject: prefix + "." + kind + "." + id, Data: data, MsgID: msgID}
}

// CandleLoad is how the candle history got in: published to the sandbox's
// stream and applied by an ingest child.
type CandleLoad struct {
	Markets int       `json:"markets"`
	Hours   int       `json:"hours"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Prices  int       `json:"prices"`
	Trades  int       `json:"trades"`
	// Outcomes are ingest's counts by kind and outcome, from its metrics. A
	// price superseded by a newer one of its market in the same batch counts
	// as ignored, though its point is in the candles; none is rejected.
	Outcomes map[string]float64 `json:"ingest_outcomes"`
	Seconds  float64            `json:"seconds"`
	ChildLog string             `json:"ingest_log"`
}

// LoadCandles publishes h through the sandbox's stream to a `marketdata
// ingest` child, waits until ingest has taken all of it and folded it into
// the coarse candle tables, and stops the child, so nothing changes while
// the routes are measured. A message ingest
// rejected, or a trade it did not apply, is a candle the route would not
// show: an error. (CheckCandles then checks the answer itself.)
func LoadCandles(ctx context.Context, o *Options, sb *Sandbox, dsn string, h *CandleHistory, logPath string, log *slog.Logger) (CandleLoad, error) {
	start := time.Now()
	load := CandleLoad{Markets: len(h.Markets), Hours: int(h.To.Sub(h.From) / time.Hour), From: h.From, To: h.To,
		Outcomes: map[string]float64{}, ChildLog: logPath}
	for _, n := range h.Prices {
		load.Prices += n
	}
	for _, n := range h.Trades {
		load.Trades += n
	}
	child, err := StartIngestChild(ctx, o, sb, dsn, load.ChildLog, log)
	if err != nil {
		return load, err
	}
	defer StopIngest(child, log, "candles")
	pub, err := NewPublisher(sb.NC, PublishWindow)
	if err != nil {
		return load, err
	}
	if err := pub.PublishAll(ctx, h.Msgs); err != nil {
		return load, fmt.Errorf("candles: %w", err)
	}
	if err := pub.Wait(ctx, AckTimeout); err != nil {
		return load, fmt.Errorf("candles: %w", err)
	}
	if err := sb.Drained(ctx, DrainTimeout, child.Alive); err != nil {
		return load, fmt.Errorf("candles: %w", err)
	}
	// Ingest folds the candles it queued every second and closes the 5m
	// buckets, hours and days of the history: wait until it has, so the
	// route reads the coarse tables as it does in production, not a
	// history all still in the 1m store.
	var m map[string]float64
	for deadline := time.Now().Add(DrainTimeout); ; {
		if m, err = child.Metrics(ctx); err != nil {
			return load, err
		}
		// Up to the history's last 5m bucket, which may end too recently to
		// close (a minute's grace); the route reads it from the 1m store.
		if m["marketdata_ingest_candles_closed_timestamp_seconds"] >= float64(h.To.Add(-5*time.Minute).Unix()) {
			break
		}
		if time.Now().After(deadline) {
			return load, fmt.Errorf("candles: ingest's fold did not reach %s within %s (%s)", h.To.Format(time.RFC3339), DrainTimeout, load.ChildLog)
		}
		select {
		case <-ctx.Done():
			return load, ctx.Err()
		case <-time.After(200 * time.Millisecond): // polling ingest's metrics
		}
	}
	for _, kind := range []string{ingest.KindPrice, ingest.KindTrade} {
		for _, outcome := range []string{ingest.OutcomeApplied, ingest.OutcomeIgnored, ingest.OutcomeRejected} {
			load.Outcomes[kind+" "+outcome] = m[`marketdata_ingest_messages_total{kind="`+kind+`",outcome="`+outcome+`"}`]
		}
	}
	load.Seconds = measure.Round2(time.Since(start).Seconds())
	out := load.Outcomes
	switch {
	case out["price rejected"]+out["trade rejected"] > 0:
		return load, fmt.Errorf("candles: ingest rejected %.0f prices and %.0f trades (%s)", out["price rejected"], out["trade rejected"], load.ChildLog)
	case out["price applied"]+out["price ignored"] != float64(load.Prices):
		return load, fmt.Errorf("candles: ingest took %.0f of %d prices (%s)", out["price applied"]+out["price ignored"], load.Prices, load.ChildLog)
	case out["trade applied"] != float64(load.Trades):
		return load, fmt.Errorf("candles: ingest applied %.0f of %d trades (%s)", out["trade applied"], load.Trades, load.ChildLog)
	}
	log.Info("reads: candle history applied", "messages", len(h.Msgs), "seconds", load.Seconds)
	return load, nil
}

// CheckCandles checks the route's answer against the history of market:
// one candle an hour, each with the trades published in it and, as its bid
// close, the best bid of the hour's last price (so every hour's trades and
// price points are in: the route reads what ingest applied, not an empty
// range).
func CheckCandles(body []byte, h *CandleHistory, market string) error {
	var ans struct {
		Data []struct {
			Start  time.Time `json:"start"`
			Trades int       `json:"trades"`
			Bid    *struct {
				Close *float64 `json:"close"`
			} `json:"bid"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("candles answer: %w", err)
	}
	want, err := h.hours(market)
	if err != nil {
		return err
	}
	if len(ans.Data) != len(want) {
		return fmt.Errorf("candles answer: %d candles, want %d", len(ans.Data), len(want))
	}
	for k, c := range ans.Data {
		w := want[k]
		switch {
		case !c.Start.Equal(w.start):
			return fmt.Errorf("candles answer: candle %d starts at %s, want %s", k, c.Start, w.start)
		case c.Trades != w.trades:
			return fmt.Errorf("candles answer: candle %s has %d trades, want the %d published", c.Start, c.Trades, w.trades)
		case c.Bid == nil || c.Bid.Close == nil || math.Abs(*c.Bid.Close-w.bidClose) > 1e-9:
			return fmt.Errorf("candles answer: candle %s: bid %+v, want close %v", c.Start, c.Bid, w.bidClose)
		}
	}
	return nil
}

// hourFigures are what the history puts in one of a market's 1h candles.
type hourFigures struct {
	start    time.Time
	trades   int
	bidClose float64 // the best bid of the hour's last price
}

// hours are market's figures for every hour of the history, in order.
func (h *CandleHistory) hours(market string) ([]hourFigures, error) {
	n := int(h.To.Sub(h.From) / time.Hour)
	out := make([]hourFigures, n)
	for k := range out {
		out[k].start = h.From.Add(time.Duration(k) * time.Hour)
	}
	for _, m := range h.Msgs {
		u, err := ingest.Decode(h.Prefix, m.Subject, m.Data)
		if err != nil {
			return nil, fmt.Errorf("candle history: %s: %w", m.Subject, err)
		}
		switch {
		case u.Trade != nil && u.Trade.MarketID == market:
			out[int(u.Trade.TS.Sub(h.From)/time.Hour)].trades++
		case u.Price != nil && u.Price.MarketID == market:
			best := 0.0
			for _, q := range u.Price.Quotes {
				best = math.Max(best, *q.Bid)
			}
			out[int(u.Price.TS.Sub(h.From)/time.Hour)].bidClose = best
		}
	}
	return out, nil
}

package ingest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/candletest"
	"github.com/marketdata/marketdata/store"
)

// TestCandlesReference publishes, through NATS to a running worker, price
// and trade messages of a few markets — several versions of a market in a
// row, versions not above one applied before, prices and trades late by up
// to an hour, trades delivered twice — and holds every interval and series
// of store.Candles to a reference computed from the published messages
// alone (internal/candletest). Messages go in phases, each drained before
// the next, and a phase's versions not above the stored one are at most a
// previous phase's: whichever batches the worker makes, the same messages
// count. The worker made the candle partitions around now.
func TestCandlesReference(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.SweepEvery = 200 * time.Millisecond // a failed attempt at the partitions is tried again soon
	e.cfg.FoldEvery = 100 * time.Millisecond
	e.startWorker(t)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(20, 2))
	base := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	markets := []string{"CM-1", "CM-2", "CM-3"}
	m := candletest.New()
	stored := map[string]int64{}  // highest version published in earlier phases
	version := map[string]int64{} // highest version published
	clock := map[string]time.Duration{}
	var trades []store.Trade
	cents := func() float64 { return float64(1+rng.IntN(98)) / 100 }
	for phase := range 4 {
		for n := range 150 {
			market := markets[rng.IntN(len(markets))]
			if rng.IntN(3) == 0 {
				var tr store.Trade
				if len(trades) > 0 && rng.IntN(4) == 0 {
					tr = trades[rng.IntN(len(trades))] // delivered again
				} else {
					ts := base.Add(clock[market] - time.Duration(rng.IntN(3600))*time.Second).
						Add(time.Duration(rng.IntN(1e6)) * time.Microsecond)
					tr = store.Trade{MarketID: market, TradeID: fmt.Sprintf("CT-%d-%03d", phase, n),
						Venue: store.Venues[rng.IntN(4)], Price: cents(), Size: float64(1+rng.IntN(40)) / 8, Side: "sell", TS: ts}
					trades = append(trades, tr)
				}
				m.ApplyBatch(nil, []store.Trade{tr})
				e.publish(t, e.subject("trade", tr.MarketID), mustJSON(t, map[string]any{
					"market_id": tr.MarketID, "trade_id": tr.TradeID, "venue": tr.Venue, "price": tr.Price,
					"size": tr.Size, "side": tr.Side, "ts": tr.TS.Format(time.RFC3339Nano),
				}), "")
				continue
			}
			v := version[market] + 1
			if stored[market] > 0 && rng.IntN(6) == 0 {
				v = 1 + rng.Int64N(stored[market]) // not above what an earlier phase applied
			} else {
				version[market] = v
			}
			clock[market] += time.Duration(rng.IntN(300)) * time.Second
			ts := base.Add(clock[market]).Add(time.Duration(rng.IntN(1e6)) * time.Microsecond)
			if rng.IntN(5) == 0 {
				ts = ts.Add(-time.Duration(rng.IntN(3600)) * time.Second) // late
			}
			p := store.Price{MarketID: market, Version: v, TS: ts, Quotes: map[string]store.Quote{}}
			quotes := map[string]any{}
			for _, venue := range store.Venues {
				if rng.IntN(3) == 0 {
					continue
				}
				bid, ask := cents(), cents()
				q := store.Quote{Bid: &bid, Ask: &ask}
				wire := map[string]any{"bid": bid, "ask": ask, "last": nil, "volume_24h": 10}
				if rng.IntN(10) == 0 {
					q.Bid, wire["bid"] = nil, nil
				}
				p.Quotes[venue], quotes[venue] = q, wire
			}
			m.ApplyBatch([]store.Price{p}, nil)
			e.publish(t, e.subject("price", market), mustJSON(t, map[string]any{
				"market_id": market, "version": v, "ts": ts.Format(time.RFC3339Nano), "quotes": quotes,
			}), "")
		}
		e.waitDrained(t, 30*time.Second)
		for _, mk := range markets {
			stored[mk] = version[mk]
		}
	}

	// The worker folds the queues: wait until it has taken everything, so
	// the reads below come from the 1m store and the coarse tables.
	eventually(t, 20*time.Second, "the worker folds the candle queues", func() error {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM candle_points_new) + (SELECT count(*) FROM candle_point_batch_rows) + (SELECT count(*) FROM candle_trades_new)`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d rows queued", n)
		}
		return nil
	})

	end := base.Add(slices.Max([]time.Duration{clock[markets[0]], clock[markets[1]], clock[markets[2]]})).Add(2 * time.Hour)
	for _, r := range [][2]time.Time{{base.Add(-2 * time.Hour), end}, {base.Add(97 * time.Minute), base.Add(5 * time.Hour)}} {
		for _, market := range markets {
			for _, series := range store.CandleSeries {
				for _, interval := range store.CandleIntervals {
					step, _ := store.CandleStep(interval)
					got, err := e.st.Candles(ctx, market, interval, series, r[0], r[1])
					if err != nil {
						t.Fatalf("Candles(%s, %s, %s): %v", market, interval, series, err)
					}
					want := m.Candles(market, step, series, r[0], r[1])
					if g, w := string(mustJSON(t, got)), string(mustJSON(t, want)); g != w {
						t.Errorf("Candles(%s, %s, %s, %s, %s):\n got: %.1500s\nwant: %.1500s", market, interval, series,
							r[0].Format(time.RFC3339), r[1].Format(time.RFC3339), g, w)
					}
				}
			}
		}
	}

	// The partitions around now, made by the worker.
	month := time.Date(time.Now().UTC().Year(), time.Now().UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	deadline := time.Now().Add(20 * time.Second)
	for k := 0; k < 6; {
		name := []string{"candle_points_", "candle_trades_"}[k%2] + month.AddDate(0, k/2, 0).Format("200601")
		var ok bool
		if err := e.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		switch {
		case ok:
			k++
		case time.Now().After(deadline):
			t.Fatalf("partition %s not made by the worker within 20 s", name)
		default:
			time.Sleep(50 * time.Millisecond)
		}
	}
}

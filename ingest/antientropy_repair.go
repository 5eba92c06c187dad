package ingest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// Comparing a page of documents with Redis and rewriting what is behind.

// comparePage compares one page after the given document name; the caller
// holds the lock. It returns where the next page starts and whether the walk
// is done.
func (a *AntiEntropy) comparePage(ctx context.Context, after string) (st PassStats, next string, done bool, err error) {
	revs, err := a.store.DocRevs(ctx, after, a.cfg.Page)
	if err != nil {
		return st, after, false, err
	}
	if len(revs) == 0 {
		return st, "", true, nil
	}
	st, err = a.page(ctx, revs)
	if err != nil {
		return st, after, false, err
	}
	return st, revs[len(revs)-1].Name, len(revs) < a.cfg.Page, nil
}

// page compares one page of documents and repairs those behind.
func (a *AntiEntropy) page(ctx context.Context, revs []store.DocRev) (PassStats, error) {
	var st PassStats
	eventRev, marketRev := map[string]int64{}, map[string]int64{}
	var events, markets []string
	for _, d := range revs {
		kind, id, _ := strings.Cut(d.Name, ":")
		switch kind {
		case "e":
			events = append(events, id)
			eventRev[id] = d.Rev
		case "m":
			markets = append(markets, id)
			marketRev[id] = d.Rev
		}
	}
	have, err := a.cache.ReadRevisions(ctx, events, markets)
	if err != nil {
		return st, err
	}
	// Postgres first: ingest writes Redis after it commits, so whatever
	// Redis lacks when read after was committed before the Postgres read.
	wantTrades, err := a.store.TradeWindows(ctx, markets, cache.MaxTrades)
	if err != nil {
		return st, err
	}
	haveTrades, err := a.cache.ReadTradeWindows(ctx, markets)
	if err != nil {
		return st, err
	}
	st.Checked = len(revs) + len(wantTrades)
	behindEvents := slices.DeleteFunc(slices.Clone(events), func(id string) bool {
		return have.Events[id] >= eventRev[id] && have.Listing[id] >= eventRev[id]
	})
	behindMarkets := slices.DeleteFunc(slices.Clone(markets), func(id string) bool {
		return have.Markets[id] >= marketRev[id]
	})
	var tradeMarkets []string
	for _, id := range markets {
		w, ok := wantTrades[id]
		if !ok {
			continue
		}
		h := haveTrades[id]
		if h.N != int64(w.N) || h.Newest != cache.TradeScore(&store.Trade{TS: w.Newest}) ||
			h.Oldest != cache.TradeScore(&store.Trade{TS: w.Oldest}) {
			tradeMarkets = append(tradeMarkets, id)
		}
	}
	if a.metrics != nil {
		a.metrics.Checked.Add(float64(st.Checked))
	}
	if len(behindEvents)+len(behindMarkets)+len(tradeMarkets) == 0 {
		return st, nil
	}
	return a.repair(ctx, st, behindEvents, behindMarkets, tradeMarkets)
}

// repair reads the current documents of the ids found behind, keeps those
// Redis still holds an older revision of (ingest may have written them since
// the comparison) and the trade lists that really lost trades, writes them,
// and announces them.
func (a *AntiEntropy) repair(ctx context.Context, st PassStats, events, markets, tradeMarkets []string) (PassStats, error) {
	// The trades first: when they wait to settle, the documents' re-check
	// below comes after the wait too.
	trades, tradeMarkets, err := a.lostTrades(ctx, tradeMarkets)
	if err != nil {
		return st, err
	}
	var evDocs []store.EventDoc
	var mkDocs []store.MarketDoc
	if len(events) > 0 {
		if evDocs, err = a.store.EventDocsByID(ctx, events); err != nil {
			return st, err
		}
	}
	if len(markets) > 0 {
		if mkDocs, err = a.store.MarketDocsByID(ctx, markets); err != nil {
			return st, err
		}
	}
	now, err := a.cache.ReadRevisions(ctx, events, markets)
	if err != nil {
		return st, err
	}
	var n notice.Change
	evDocs = slices.DeleteFunc(evDocs, func(d store.EventDoc) bool {
		docBehind, listingBehind := now.Events[d.ID] < d.Rev, now.Listing[d.ID] < d.Rev
		if docBehind {
			st.Events++
		}
		if listingBehind {
			st.Listings++
		}
		if docBehind || listingBehind {
			n.Events = append(n.Events, d.ID)
		}
		return !docBehind && !listingBehind
	})
	mkDocs = slices.DeleteFunc(mkDocs, func(d store.MarketDoc) bool {
		if now.Markets[d.ID] < d.Rev {
			st.Markets++
			n.Markets = append(n.Markets, d.ID)
			return false
		}
		return true
	})
	st.TradeLists = len(tradeMarkets)
	n.Trades = tradeMarkets
	if len(evDocs)+len(mkDocs)+len(trades) == 0 {
		return st, nil
	}
	// The notice Apply returns names what was rewritten and carries the
	// price items (nodes' replicas take them from it).
	n, err = a.cache.ApplyDocs(ctx, evDocs, mkDocs, trades)
	if err != nil {
		if n.Seq > 0 {
			// It took a number and may have written in part: the notice
			// drops what it names and closes the number's gap.
			a.notify(n)
		}
		return st, fmt.Errorf("ingest: anti-entropy: rewrite: %w", err)
	}
	if a.metrics != nil {
		a.metrics.Repaired.WithLabelValues("event").Add(float64(st.Events))
		a.metrics.Repaired.WithLabelValues("listing").Add(float64(st.Listings))
		a.metrics.Repaired.WithLabelValues("market").Add(float64(st.Markets))
		a.metrics.Repaired.WithLabelValues("trades").Add(float64(st.TradeLists))
	}
	a.log.Info("anti-entropy repaired cache documents", "events", st.Events, "listings", st.Listings,
		"markets", st.Markets, "trade_lists", st.TradeLists)
	a.notify(n)
	return st, nil
}

// lostTrades narrows the markets whose trade windows differ from Postgres'
// to those whose lists in Redis lost trades, and returns their newest trades
// in Postgres to rewrite. A window also differs while ingest is between its
// commit and its Redis write, or when Redis holds trades committed after the
// window was read: neither is a loss. So a list is lost only when trades
// Postgres holds are missing from it in two looks Settle apart (ingest's
// write takes milliseconds). Rewriting adds to the list and keeps its newest
// (see cache.Apply), so a rewrite never takes out a newer trade.
func (a *AntiEntropy) lostTrades(ctx context.Context, markets []string) ([]store.Trade, []string, error) {
	if len(markets) == 0 {
		return nil, nil, nil
	}
	newest := make(map[string][]store.Trade, len(markets))
	var all []store.Trade
	for _, id := range markets {
		ts, err := a.store.NewestTrades(ctx, id, cache.MaxTrades)
		if err != nil {
			return nil, nil, err
		}
		newest[id] = ts
		all = append(all, ts...)
	}
	missing, err := a.cache.MissingTrades(ctx, all)
	if err != nil || len(missing) == 0 {
		return nil, nil, err
	}
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(a.cfg.Settle):
	}
	var again []store.Trade
	for _, ts := range missing {
		again = append(again, ts...)
	}
	still, err := a.cache.MissingTrades(ctx, again)
	if err != nil {
		return nil, nil, err
	}
	var trades []store.Trade
	var lost []string
	for _, id := range markets {
		if len(still[id]) > 0 {
			lost = append(lost, id)
			trades = append(trades, newest[id]...)
		}
	}
	return trades, lost, nil
}

func (a *AntiEntropy) notify(n notice.Change) {
	if a.nc == nil {
		return
	}
	if err := a.nc.Publish(a.cfg.NoticeSubject, n.EncodeWithin(a.nc.MaxPayload())); err != nil {
		a.log.Warn("anti-entropy change notice not published", "err", err)
	}
}

package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/marketdata/marketdata/cache"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// endToEnd publishes msgs as fast as the window allows while ingest runs,
// and measures from the first publish until every market's final version is
// visible in Redis, polled every 50 ms.
func endToEnd(ctx context.Context, sb *world.Sandbox, child *world.Child, pub *world.Publisher, c *cache.Cache, ids []string,
	msgs []world.Outgoing, r world.Round, log *slog.Logger) (EndToEndResult, error) {
	ps, err := world.StartPhase(ctx, child, sb.PG)
	if err != nil {
		return EndToEndResult{}, err
	}
	log.Info("end-to-end: publishing", "updates", len(msgs))
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pubErr := make(chan error, 1)
	var pubTook time.Duration
	start := time.Now()
	go func() {
		err := pub.PublishAll(pctx, msgs)
		pubTook = time.Since(start)
		pubErr <- err
	}()

	// Markets left to see at their final version, in publish order: one
	// that is not there yet means the later ones need no read this time.
	remaining := make([]int, len(ids))
	for i := range remaining {
		remaining[i] = i
	}
	deadline := time.NewTimer(world.VisibleTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(world.PollEvery)
	defer tick.Stop()
	published := false
	for len(remaining) > 0 {
		select {
		case <-ctx.Done():
			return EndToEndResult{}, ctx.Err()
		case <-deadline.C:
			return EndToEndResult{}, fmt.Errorf("lost updates: %d markets not at their final version after %s", len(remaining), world.VisibleTimeout)
		case err := <-pubErr:
			if err != nil {
				return EndToEndResult{}, err
			}
			published = true
			log.Info("end-to-end: published", "seconds", measure.Round2(pubTook.Seconds()))
			continue
		case <-tick.C:
		}
		if err := child.Alive(); err != nil {
			return EndToEndResult{}, err
		}
		if remaining, err = poll(ctx, c, ids, remaining, r); err != nil {
			return EndToEndResult{}, err
		}
	}
	took := time.Since(start)
	if !published {
		if err := <-pubErr; err != nil {
			return EndToEndResult{}, err
		}
	}
	if err := pub.Wait(ctx, world.AckTimeout); err != nil {
		return EndToEndResult{}, err
	}
	if err := sb.Drained(ctx, world.DrainTimeout, child.Alive); err != nil {
		return EndToEndResult{}, err
	}
	side, err := ps.End(ctx, child)
	if err != nil {
		return EndToEndResult{}, err
	}
	res := EndToEndResult{
		Updates: len(msgs), PublishSeconds: measure.Round2(pubTook.Seconds()),
		PublishRate: measure.Round2(float64(len(msgs)) / pubTook.Seconds()),
		Seconds:     measure.Round2(took.Seconds()), UpdatesPerS: measure.Round2(float64(len(msgs)) / took.Seconds()),
		Ingest: side,
	}
	log.Info("end-to-end: all visible", "seconds", res.Seconds, "updates_per_s", res.UpdatesPerS)
	return res, nil
}

// poll reads the remaining markets from the front, in pipelines of 500, and
// returns those not yet at their final version. It stops at the first chunk
// that still has one: the rest, published later, are not worth a read yet.
func poll(ctx context.Context, c *cache.Cache, ids []string, remaining []int, r world.Round) ([]int, error) {
	const chunk = 500
	var left []int
	for k := 0; k < len(remaining); k += chunk {
		part := remaining[k:min(k+chunk, len(remaining))]
		names := make([]string, len(part))
		for j, i := range part {
			names[j] = ids[i]
		}
		versions, err := Visible(ctx, c, names)
		if err != nil {
			return nil, err
		}
		for j, i := range part {
			if versions[j] < r.Final(i) {
				left = append(left, i)
			}
		}
		if len(left) > 0 {
			return append(left, remaining[k+len(part):]...), nil
		}
	}
	return left, nil
}

// freshness publishes round r at rate per second while following the change
// notices, and measures each update's publish-to-visible time.
func freshness(ctx context.Context, sb *world.Sandbox, child *world.Child, pub *world.Publisher, c *cache.Cache, ids []string,
	w *world.World, r world.Round, rate float64, log *slog.Logger) (FreshnessResult, error) {
	msgs := w.PriceMsgs(w.Prices(r))
	tr := NewTracker(c, ids, r)
	stop, err := tr.Subscribe(sb.NC, sb.Ingest.NoticeSubject, 2)
	if err != nil {
		return FreshnessResult{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	ps, err := world.StartPhase(ctx, child, sb.PG)
	if err != nil {
		return FreshnessResult{}, err
	}
	log.Info("freshness: publishing", "updates", len(msgs), "rate_per_s", rate)
	first, last, err := pub.PublishPaced(ctx, msgs, rate, tr.Published)
	if err != nil {
		return FreshnessResult{}, err
	}
	achieved := float64(len(msgs)-1) / last.Sub(first).Seconds()
	log.Info("freshness: published", "seconds", measure.Round2(last.Sub(first).Seconds()), "rate_per_s", measure.Round2(achieved))
	if err := pub.Wait(ctx, world.AckTimeout); err != nil {
		return FreshnessResult{}, err
	}
	select {
	case <-tr.All():
	case <-time.After(world.AckTimeout):
		log.Warn("freshness: not every update was seen through a notice", "timeout", world.AckTimeout)
	case <-ctx.Done():
		return FreshnessResult{}, ctx.Err()
	}
	if err := sb.Drained(ctx, world.DrainTimeout, child.Alive); err != nil {
		return FreshnessResult{}, err
	}
	side, err := ps.End(ctx, child)
	if err != nil {
		return FreshnessResult{}, err
	}
	stop()
	stopped = true
	st, lastErr := tr.Stats()
	if lastErr != nil {
		log.Warn("freshness: some notices could not be followed", "errors", st.ReadErrors, "last", lastErr)
	}
	// Unmeasured updates are fine if they are visible (a notice was missed);
	// updates that never became visible are lost.
	versions, err := Visible(ctx, c, ids)
	if err != nil {
		return FreshnessResult{}, err
	}
	lost := 0
	for i, v := range versions {
		if v < r.Final(i) {
			lost++
		}
	}
	if lost > 0 {
		return FreshnessResult{}, fmt.Errorf("lost updates: %d markets not at their final version", lost)
	}
	res := FreshnessResult{
		Updates: len(msgs), TargetRate: rate, AchievedRate: measure.Round2(achieved),
		PublishSeconds: measure.Round2(last.Sub(first).Seconds()), FreshnessStats: st, Ingest: side,
	}
	log.Info("freshness: done", "p50_ms", st.P50MS, "p99_ms", st.P99MS, "count", st.Count)
	return res, nil
}

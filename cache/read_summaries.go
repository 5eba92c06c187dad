package cache

import (
	"context"
	"fmt"

	"github.com/marketdata/marketdata/store"
)

// Summaries returns every listed event's summary (what the search index
// ranks): from Redis when it holds the whole listing, else (Redis flushed
// and not yet rebuilt, or not answering) from the store, so a node started
// while Redis is down still loads its index.
func (r *Reader) Summaries(ctx context.Context) (map[string][]byte, error) {
	out, ok, rerr := r.wholeListing(ctx, func() (map[string][]byte, error) { return r.cache.Summaries(ctx) })
	if ok {
		r.count(resSummaries, layerRedis, 1)
		return out, nil
	}
	events, err := r.store.ListedEvents(ctx, store.ListFilter{}, "", 0)
	if err != nil {
		if rerr != nil {
			return nil, fmt.Errorf("redis: %w; postgres: %w", rerr, err)
		}
		return nil, err
	}
	r.count(resSummaries, layerStore, 1)
	out = make(map[string][]byte, len(events))
	for i := range events {
		out[events[i].ID] = r.rules.RenderEvent(store.EventDoc{ID: events[i].ID, Event: &events[i]}).Summary
	}
	return out, nil
}

// SummariesOf returns the summaries of ids (what search re-reads after a
// change notice); an id with no summary — not listed, or no longer — is
// left out of the map.
func (r *Reader) SummariesOf(ctx context.Context, ids []string) (map[string][]byte, error) {
	out, ok, err := r.wholeListing(ctx, func() (map[string][]byte, error) { return r.cache.SummariesOf(ctx, ids) })
	if err != nil || ok {
		if ok {
			r.count(resSummaries, layerRedis, 1)
		}
		return out, err
	}
	docs, err := r.store.EventDocsByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	r.count(resSummaries, layerStore, 1)
	out = make(map[string][]byte, len(docs))
	for _, d := range docs {
		if sum := r.rules.RenderEvent(d).Summary; sum != nil {
			out[d.ID] = sum
		}
	}
	return out, nil
}

// wholeListing reads summaries from Redis if it holds the whole listing,
// and reports false when it does not. The marker is checked before and
// after the read: Redis losing its data during the read (a flush, a
// restart) would otherwise hand the index what survived, or nothing, as the
// whole listing.
func (r *Reader) wholeListing(ctx context.Context, read func() (map[string][]byte, error)) (map[string][]byte, bool, error) {
	if ok, err := r.cache.ListingComplete(ctx); err != nil || !ok {
		return nil, false, err
	}
	out, err := read()
	if err != nil {
		return nil, false, err
	}
	if ok, err := r.cache.ListingComplete(ctx); err != nil || !ok {
		return nil, false, err
	}
	return out, true, nil
}

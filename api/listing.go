package api

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/docs"
	"github.com/marketdata/marketdata/store"
)

// listedSummaries feeds the search index: from Redis when it holds the whole
// listing, else (Redis flushed, not yet rebuilt) from the store.
type listedSummaries struct {
	cache    *cache.Cache
	fallback Fallback
}

var _ summarySource = listedSummaries{}

func (l listedSummaries) Summaries(ctx context.Context) (map[string][]byte, error) {
	out, ok, rerr := l.fromCache(ctx, func() (map[string][]byte, error) { return l.cache.Summaries(ctx) })
	if ok {
		return out, nil
	}
	// Redis lacks the listing or does not answer: Postgres holds it all (a
	// node started while Redis is down still loads its index).
	events, err := l.fallback.ListedEvents(ctx, store.ListFilter{}, "", 0)
	if err != nil {
		if rerr != nil {
			return nil, fmt.Errorf("redis: %w; postgres: %w", rerr, err)
		}
		return nil, err
	}
	out = make(map[string][]byte, len(events))
	for i := range events {
		out[events[i].ID] = l.cache.Rules().RenderEvent(store.EventDoc{ID: events[i].ID, Event: &events[i]}).Summary
	}
	return out, nil
}

func (l listedSummaries) SummariesOf(ctx context.Context, ids []string) (map[string][]byte, error) {
	if out, ok, err := l.fromCache(ctx, func() (map[string][]byte, error) { return l.cache.SummariesOf(ctx, ids) }); err != nil || ok {
		return out, err
	}
	docs, err := l.fallback.EventDocsByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(docs))
	for _, d := range docs {
		if sum := l.cache.Rules().RenderEvent(d).Summary; sum != nil {
			out[d.ID] = sum
		}
	}
	return out, nil
}

// fromCache reads summaries from Redis if it holds the whole listing, and
// reports false when it does not. The marker is checked before and after the
// read: Redis losing its data during the read (a flush, a restart) would
// otherwise hand the index what survived, or nothing, as the whole listing.
func (l listedSummaries) fromCache(ctx context.Context, read func() (map[string][]byte, error)) (map[string][]byte, bool, error) {
	if ok, err := l.cache.ListingComplete(ctx); err != nil || !ok {
		return nil, false, err
	}
	out, err := read()
	if err != nil {
		return nil, false, err
	}
	if ok, err := l.cache.ListingComplete(ctx); err != nil || !ok {
		return nil, false, err
	}
	return out, true, nil
}

// onChangeNotice refreshes the search index for the events a batch touched.
func (s *Server) onChangeNotice(m *nats.Msg) {
	var n struct {
		Events  []string `json:"events"`
		Markets []string `json:"markets"`
		// Flush: the cache was rebuilt; anything may have changed.
		Flush bool `json:"flush"`
	}
	// Messages the client dropped before this one (the subscription fell
	// behind): what they would have dropped is unknown.
	if m.Sub != nil {
		if d, err := m.Sub.Dropped(); err == nil && int64(d) > s.noticesDropped.Load() {
			s.noticesDropped.Store(int64(d))
			s.forgetHeld()
		}
	}
	err := json.Unmarshal(m.Data, &n)
	switch {
	case err == nil && n.Flush: // the cache was rebuilt
		s.forgetHeld()
		return
	case err != nil:
		// Unreadable: be safe with what a notice drops, but leave search to
		// its periodic reload (a reload per garbage message would be a cheap
		// way to load Redis).
		s.prices.flush()
		s.pages.flush()
		return
	}
	s.prices.drop(n.Markets)
	if len(n.Events) == 0 {
		return
	}
	s.pages.drop(n.Events)
	s.search.Enqueue(n.Events)
}

// openAPI serves the public API's OpenAPI document, without authentication.
func (s *Server) openAPI(c *fiber.Ctx) error {
	body, err := docs.OpenAPIJSON()
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.Send(body)
}

package cache

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// EventItem is the answer to an event read: the read body of a served
// event, or the event it was merged into, or neither (no served event has
// the id).
type EventItem struct {
	// Found: Redis or the store knows the event. Node memory holds an item
	// that is not Found as the answer "unknown".
	Found      bool
	Body       []byte
	MergedInto string
}

// EventHeld returns the event read of id from node memory, with no round
// trip, while the node follows the change notices whole (the price replica
// is ready and no notice is late): memory then misses at most the writes
// whose notices are on their way, and a lost one drops it within the
// notice wait (appliedSeqs), as it does the replica. It does not promise
// order across nodes; Event's round trip does (the caller serves a client
// that sent an ETag this item does not match through Event).
func (r *Reader) EventHeld(id string) (EventItem, bool) {
	if !r.followsWhole() {
		return EventItem{}, false
	}
	it, ok := r.events.get(id)
	if ok {
		r.count(resEvent, layerMemory, 1)
	}
	return it, ok
}

// followsWhole reports whether node memory may answer with no round trip:
// the node follows the change notices whole (the price replica is ready:
// loaded, Redis answering, the feed up) and no notice is late.
func (r *Reader) followsWhole() bool {
	return r.rep != nil && r.rep.ready.Load() && r.rep.lateMin.Load() == 0 && !r.feedDown.Load()
}

// Event returns the event read of id.
func (r *Reader) Event(ctx context.Context, id string) (EventItem, error) {
	epoch := r.g.now()
	if it, ok := r.events.get(id); ok {
		v := r.roundTrip(ctx, nil)
		if it, ok = stillHeld(r, v, epoch, it, func() (EventItem, bool) { return r.events.get(id) }); ok {
			r.count(resEvent, layerMemory, 1)
			return it, nil
		}
	}
	var cmd *redis.SliceCmd
	v := r.roundTrip(ctx, func(p redis.Pipeliner) { cmd = r.cache.QueueEvent(p, id) })
	redisErr := v.redisErr
	absent := false
	if redisErr == nil {
		e, err := ParseEvent(cmd)
		switch {
		case err != nil:
			redisErr = err
		case !e.Found:
			absent = true
		default:
			it := EventItem{Found: true, Body: e.Body, MergedInto: e.MergedInto}
			if v.keep {
				r.events.put(strings.Clone(id), it, epoch)
			}
			r.count(resEvent, layerRedis, 1)
			return it, nil
		}
	}
	docs, err := r.store.EventDocsByID(ctx, []string{id})
	if err != nil {
		return EventItem{}, unavailable(redisErr, err)
	}
	r.count(resEvent, layerStore, 1)
	d := r.rules.RenderEvent(docs[0])
	switch known := docs[0].Rev > 0; {
	case known && absent:
		r.repair(docs, nil, nil)
	case !known && absent && v.keep:
		// Unknown to Redis and to the store: held (see Prices).
		r.events.put(strings.Clone(id), EventItem{}, epoch)
	}
	return EventItem{Found: docs[0].Rev > 0, Body: d.Body, MergedInto: d.MergedInto}, nil
}

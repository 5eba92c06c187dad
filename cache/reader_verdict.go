package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// What a read may serve from node memory, judged by the change number its
// round trip to Redis brought back (see Reader).

// unavailable is ErrUnavailable with its causes.
func unavailable(redisErr, storeErr error) error {
	return fmt.Errorf("%w: %w", ErrUnavailable, errors.Join(redisErr, storeErr))
}

// recheck returns the held answers (indexes) that must be read from Redis
// after all, once Redis answered a read's round trip: all of them when
// notices are in flight, else those a drop took since the lookup at epoch
// (get looks one up again and reports whether memory still holds it).
func (r *Reader) recheck(v verdict, epoch uint64, held []int, get func(int) bool) []int {
	if !v.trust {
		return held
	}
	if r.g.now() == epoch {
		return nil
	}
	var again []int
	for _, i := range held {
		if !get(i) {
			again = append(again, i)
		}
	}
	return again
}

// stillHeld reports whether an answer node memory held (it, looked up at
// epoch) may be served once the read's round trip brought verdict v: when
// Redis did not answer (degraded), or when no notice is in flight and no
// drop happened since the lookup, or when memory still holds one after the
// drop (get looks again: see Reader).
func stillHeld[V any](r *Reader, v verdict, epoch uint64, it V, get func() (V, bool)) (V, bool) {
	switch {
	case v.redisErr != nil:
		return it, true
	case !v.trust:
		return it, false
	case r.g.now() == epoch:
		return it, true
	default:
		return get()
	}
}

// verdict is what a read may do with the answers node memory held, once
// its round trip to Redis came back.
type verdict struct {
	// trust: the answers held may be served.
	trust bool
	// keep: answers read from Redis may be stored (no notice in flight).
	keep bool
	// redisErr: Redis did not answer the round trip (its commands must not
	// be read); memory's answers are served, degraded.
	redisErr error
}

// roundTrip sends queue (nil: nothing but the change number) and returns
// the verdict on node memory that the change number it brings back gives.
func (r *Reader) roundTrip(ctx context.Context, queue func(redis.Pipeliner)) verdict {
	seq, seqErr, err := r.trips.do(ctx, queue)
	return r.verdictOf(ctx, seq, seqErr, err)
}

// verdictOf is roundTrip's verdict on a round trip's outcome.
func (r *Reader) verdictOf(ctx context.Context, seq int64, seqErr, err error) verdict {
	switch {
	case err != nil:
		return verdict{trust: true, redisErr: err}
	case seqErr != nil && !answered(seqErr):
		// Redis did not answer (a refused dial, a dropped connection):
		// degraded, as when the round trip itself failed.
		return verdict{trust: true, redisErr: seqErr}
	case seqErr != nil:
		return verdict{}
	case r.seqs.mayServe(seq):
		return verdict{trust: true, keep: true}
	case r.cfg.NoticeGrace > 0 && r.seqs.await(ctx, seq, r.cfg.NoticeGrace):
		// The notices came while the read waited: memory answers (what
		// they dropped is looked up again: recheck), but what this round
		// trip read from Redis may predate them and is not kept.
		return verdict{trust: true}
	default:
		return verdict{}
	}
}

// answered says whether a command reached Redis: it has a reply, an error
// reply included (not a transport failure).
func answered(err error) bool {
	var re redis.Error
	return err == nil || errors.As(err, &re)
}

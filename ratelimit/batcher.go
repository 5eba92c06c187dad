package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// admitReq is one queued admission.
type admitReq struct {
	addr, account string
	res           Admission
	err           error
	// leaseWait: refused while a lease of the window may be out this long.
	leaseWait time.Duration
	done      chan struct{}
	// state is reqQueued until a sender takes the request (reqTaken) or the
	// caller gives up waiting first (reqAbandoned): exactly one of them wins,
	// so an abandoned request is never counted in Redis, and a taken one is
	// always finished (done closed) before its caller reads its result.
	state atomic.Int32
}

const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

// batcher sends queued admissions to Redis together: each sender takes what
// is queued at that moment (up to maxBatch), so under load many requests
// share one round trip, and a lone request goes out at once. A few senders
// run, so one slow round trip does not hold up the rest.
type batcher struct {
	once  sync.Once
	queue chan *admitReq
}

const (
	maxBatch = 128
	senders  = 2
)

func (b *batcher) start(l *Limiter) {
	b.once.Do(func() {
		b.queue = make(chan *admitReq, 4096)
		for range senders {
			go b.send(l)
		}
	})
}

func (b *batcher) send(l *Limiter) {
	reqs := make([]*admitReq, 0, maxBatch)
	for first := range b.queue {
		if !first.state.CompareAndSwap(reqQueued, reqTaken) {
			continue
		}
		reqs = append(reqs[:0], first)
	fill:
		for len(reqs) < maxBatch {
			select {
			case r := <-b.queue:
				if r.state.CompareAndSwap(reqQueued, reqTaken) {
					reqs = append(reqs, r)
				}
			default:
				break fill
			}
		}
		l.admitBatch(reqs)
	}
}

package ratelimit

import (
	"time"

	"github.com/marketdata/marketdata/internal/batch"
)

// admitReq is one queued admission. Its batch.Entry makes sure an abandoned
// request is never counted in Redis, and a taken one is always finished
// (done closed) before its caller reads its result.
type admitReq struct {
	batch.Entry
	addr, account string
	res           Admission
	err           error
	// leaseWait: refused while a lease of the window may be out this long.
	leaseWait time.Duration
	// retry: the request's second try (Admit), which asks for no lease.
	retry bool
	done  chan struct{}
}

// The admission queue: each sender takes what is queued at that moment (up
// to admitBatchMax) and decides it in one round trip (admitBatch), so under
// load many requests share one, and a lone request goes out at once. A few
// senders run, so one slow round trip does not hold up the rest.
const (
	admitBatchMax = 128
	admitSenders  = 2
	admitDepth    = 4096
)

func newAdmitQueue(l *Limiter) *batch.Queue[*admitReq] {
	return batch.New(batch.Config{Max: admitBatchMax, Senders: admitSenders, Depth: admitDepth}, l.admitBatch)
}

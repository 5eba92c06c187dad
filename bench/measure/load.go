package measure

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// LoadResult is one closed-loop load run over loopback.
type LoadResult struct {
	Conns    int     `json:"connections"`
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	RPS      float64 `json:"requests_per_s"`
	P50MS    float64 `json:"p50_ms"`
	P90MS    float64 `json:"p90_ms"`
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
	Errors   int64   `json:"errors"`
	// Unexpected counts answers whose status was not the expected one.
	Unexpected int64 `json:"unexpected_status"`
}

// Target is what a load run requests.
type Target struct {
	Addr    string
	Path    string
	Headers map[string]string
	Status  int
}

// Load runs conns closed-loop clients against t for warmup (not counted) and
// then d, each client sending its next request as soon as the answer is in.
func Load(ctx context.Context, t Target, conns int, warmup, d time.Duration) (LoadResult, error) {
	hc := &fasthttp.HostClient{Addr: t.Addr, MaxConns: conns, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	// The run's connections end with it: left idle, they would hold places
	// under the node's MD_MAX_CONNS (the idle benchmark runs at the cap).
	defer hc.CloseIdleConnections()
	var counting atomic.Bool
	var errs, unexpected atomic.Int64
	lat := make([][]time.Duration, conns)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://" + t.Addr + t.Path)
			for k, v := range t.Headers {
				req.Header.Set(k, v)
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				err := hc.Do(req, resp)
				el := time.Since(start)
				if !counting.Load() {
					continue
				}
				switch {
				case err != nil:
					errs.Add(1)
				case resp.StatusCode() != t.Status:
					unexpected.Add(1)
				default:
					lat[i] = append(lat[i], el)
				}
			}
		}()
	}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
	}
	counting.Store(true)
	started := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	counting.Store(false)
	elapsed := time.Since(started)
	close(stop)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return LoadResult{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return LoadResult{}, fmt.Errorf("no successful request to %s%s (errors %d, unexpected status %d)", t.Addr, t.Path, errs.Load(), unexpected.Load())
	}
	slices.Sort(all)
	q := func(p float64) float64 { return MS(all[min(len(all)-1, int(p*float64(len(all))))]) }
	return LoadResult{
		Conns: conns, Seconds: Round2(elapsed.Seconds()), Requests: int64(len(all)),
		RPS: Round2(float64(len(all)) / elapsed.Seconds()), P50MS: q(0.50), P90MS: q(0.90), P99MS: q(0.99),
		MaxMS: MS(all[len(all)-1]), Errors: errs.Load(), Unexpected: unexpected.Load(),
	}, nil
}

func MS(d time.Duration) float64 { return Round2(float64(d.Microseconds()) / 1000) }

// RaiseFileLimit raises this process's open-file soft limit to at least n.
func RaiseFileLimit(n uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur >= n {
		return nil
	}
	if lim.Max < n {
		return fmt.Errorf("RLIMIT_NOFILE hard limit %d is below the %d this benchmark needs (ulimit -Hn)", lim.Max, n)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", n, err)
	}
	return nil
}

func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

package poll

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// captureBodies fetches every watchlist once from addr with its poller's
// key: the bodies the bare baseline serves, each checked against a full
// decode so the scan the run relies on reads this binary's answers right.
func captureBodies(ctx context.Context, addr string, pollers []*world.Poller) (map[string][]byte, error) {
	bodies := make(map[string][]byte, len(pollers))
	var mu sync.Mutex
	work := make(chan *world.Poller)
	errs := make(chan error, pollCaptureWorkers)
	for range pollCaptureWorkers {
		go func() {
			hc := &fasthttp.HostClient{Addr: addr, MaxConns: 1, ReadTimeout: 10 * time.Second}
			defer hc.CloseIdleConnections()
			var first error
			for p := range work {
				if first != nil {
					continue
				}
				var body []byte
				if body, first = captureOne(hc, addr, p); first == nil {
					mu.Lock()
					bodies[p.Path[strings.IndexByte(p.Path, '?')+1:]] = body
					mu.Unlock()
				}
			}
			errs <- first
		}()
	}
	for _, p := range pollers {
		if ctx.Err() != nil {
			break
		}
		work <- p
	}
	close(work)
	var err error
	for range pollCaptureWorkers {
		err = cmp.Or(err, <-errs)
	}
	return bodies, cmp.Or(err, ctx.Err())
}

func captureOne(hc *fasthttp.HostClient, addr string, p *world.Poller) ([]byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(p.Path)
	req.Header.SetHost(addr)
	req.Header.Set(fasthttp.HeaderAuthorization, p.Auth)
	if err := hc.Do(req, resp); err != nil {
		return nil, fmt.Errorf("capture poller %d: %w", p.N, err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return nil, fmt.Errorf("capture poller %d: status %d: %.300s", p.N, resp.StatusCode(), resp.Body())
	}
	body := slices.Clone(resp.Body())
	if err := measure.CheckScan(body, p.IDs); err != nil {
		return nil, fmt.Errorf("capture poller %d: %w", p.N, err)
	}
	return body, nil
}

// pollInputs describes the watchlists.
func pollInputs(lists [][]int32, markets int) PollInputs {
	watchers := make(map[int32]int)
	for _, l := range lists {
		for _, m := range l {
			watchers[m]++
		}
	}
	in := PollInputs{DistinctWatched: len(watchers)}
	counts := slices.Sorted(maps.Values(watchers))
	if len(counts) > 0 {
		in.MostWatchers = counts[len(counts)-1]
		in.MedianWatchers = counts[len(counts)/2]
	}
	in.WatchedShare = round4(float64(len(watchers)) / float64(markets))
	return in
}

func bodySizes(bodies map[string][]byte) [3]int {
	sizes := make([]int, 0, len(bodies))
	for _, b := range bodies {
		sizes = append(sizes, len(b))
	}
	slices.Sort(sizes)
	if len(sizes) == 0 {
		return [3]int{}
	}
	return [3]int{sizes[0], sizes[len(sizes)/2], sizes[len(sizes)-1]}
}

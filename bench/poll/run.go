package poll

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/marketdata/marketdata/bench/measure"
	"github.com/marketdata/marketdata/bench/world"
)

// pollSpec is one closed-loop run of the pollers.
type pollSpec struct {
	// Nodes are the servers' names and host:ports. Connections are split
	// evenly over them, and each poller's polls go to them in turn: with
	// two nodes, consecutive polls of a poller reach both.
	Nodes []pollNode
	Conns int
	// Warmup is not counted; Duration is measured.
	Warmup, Duration time.Duration
	// Conditional sends If-None-Match with the poller's last ETag and
	// takes 304 as an answer; otherwise only 200 is.
	Conditional bool
	// Acct, when set, is given every 200 answer; its window is set here.
	Acct *pollAccount
	// Grace ends the account's window before the run does.
	Grace time.Duration
	// AtMeasure, when set, runs as the measured part begins (after the
	// warm-up): the start of figures taken outside the pollers.
	AtMeasure func()
}

// pollNode is one server under load.
type pollNode struct {
	Name, Addr string
}

// PollRun is one side of a round: what the pollers got.
type PollRun struct {
	Conns   int     `json:"connections"`
	Seconds float64 `json:"seconds"`
	// Polls are the answers counted (200 and, when conditional, 304).
	Polls       int64   `json:"polls"`
	RPS         float64 `json:"polls_per_s"`
	OK          int64   `json:"status_200"`
	NotModified int64   `json:"status_304"`
	Frac304     float64 `json:"fraction_304"`
	P50MS       float64 `json:"p50_ms"`
	P90MS       float64 `json:"p90_ms"`
	P99MS       float64 `json:"p99_ms"`
	MaxMS       float64 `json:"max_ms"`
	// MeanBody is the mean size of the 200 answers' bodies.
	MeanBody float64 `json:"mean_200_body_bytes"`
	// Errors is Transport + BadStatus + Unreadable + Incomplete.
	Errors    int64            `json:"errors"`
	Transport int64            `json:"transport_errors"`
	BadStatus map[string]int64 `json:"unexpected_status,omitempty"`
	// Unreadable answers could not be scanned for versions; Incomplete
	// ones lacked an item of the watchlist (every market has a price).
	Unreadable int64 `json:"unreadable"`
	Incomplete int64 `json:"incomplete"`
	// PerNode counts the polls each node answered.
	PerNode map[string]int64 `json:"polls_per_node"`
	// FirstError describes the first error, for the log.
	FirstError string `json:"first_error,omitempty"`
}

// connTally is one connection's counts of the measured part.
type connTally struct {
	lat                    []time.Duration
	ok, notMod, transport  int64
	unreadable, incomplete int64
	bodyBytes              int64
	status                 map[int]int64
	perNode                []int64
	firstErr               string
	firstErrAt             time.Time
}

// pollRun runs the pollers against spec's nodes: Conns connections, each
// sending its next poll as soon as the last answer is in. A poller waits in
// the queue of the node it polls next, so it is on at most one connection at
// a time and its state needs no lock.
func pollRun(ctx context.Context, pollers []*world.Poller, spec pollSpec) (PollRun, error) {
	nn := len(spec.Nodes)
	if nn == 0 || spec.Conns < nn || len(pollers) < spec.Conns {
		return PollRun{}, fmt.Errorf("poll run: %d connections over %d nodes for %d pollers", spec.Conns, nn, len(pollers))
	}
	queues := make([]chan *world.Poller, nn)
	for k := range queues {
		queues[k] = make(chan *world.Poller, len(pollers))
	}
	for _, p := range pollers {
		p.LastSent = 0 // cadence is within a run
		queues[p.Next%nn] <- p
	}
	start := time.Now()
	from := start.Add(spec.Warmup)
	end := from.Add(spec.Duration)
	var clock *world.UpdateSchedule
	if spec.Acct != nil {
		clock = spec.Acct.sched
		spec.Acct.window(from, end.Add(-spec.Grace))
		if len(spec.Acct.conns) != spec.Conns {
			return PollRun{}, fmt.Errorf("poll run: account for %d connections, run has %d", len(spec.Acct.conns), spec.Conns)
		}
	}
	tallies := make([]connTally, spec.Conns)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range spec.Conns {
		node := c % nn
		t := &tallies[c]
		t.status, t.perNode = map[int]int64{}, make([]int64, nn)
		var acct *connAccount
		if spec.Acct != nil {
			acct = &spec.Acct.conns[c]
		}
		wg.Go(func() {
			pollConn(spec, node, queues, stop, t, acct, clock, from, end)
		})
	}
	var hook sync.WaitGroup
	if spec.AtMeasure != nil {
		hook.Go(func() {
			select {
			case <-time.After(time.Until(from)):
				spec.AtMeasure()
			case <-stop:
			}
		})
	}
	select {
	case <-time.After(time.Until(end)):
	case <-ctx.Done():
	}
	close(stop)
	wg.Wait()
	hook.Wait()
	if err := ctx.Err(); err != nil {
		return PollRun{}, err
	}
	return tallyRun(spec, tallies, end.Sub(from))
}

// pollConn is one keep-alive connection to spec.Nodes[node]: it takes the
// next poller waiting for the node, polls, and queues the poller for the
// next node, until stop.
func pollConn(spec pollSpec, node int, queues []chan *world.Poller, stop <-chan struct{}, t *connTally,
	acct *connAccount, clock *world.UpdateSchedule, from, end time.Time) {
	nn := len(spec.Nodes)
	addr := spec.Nodes[node].Addr
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 1, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	for {
		var p *world.Poller
		select {
		case <-stop:
			return
		case p = <-queues[node]:
		}
		req.Reset()
		req.SetRequestURI(p.Path)
		req.Header.SetHost(addr)
		req.Header.Set(fasthttp.HeaderAuthorization, p.Auth)
		if spec.Conditional && len(p.ETag) > 0 {
			req.Header.SetBytesV(fasthttp.HeaderIfNoneMatch, p.ETag)
		}
		sent := time.Now()
		err := hc.Do(req, resp)
		at := time.Now()
		measured := !at.Before(from) && at.Before(end)
		status := resp.StatusCode()
		var startNS int64
		if acct != nil {
			startNS = clock.Since(sent)
			spec.Acct.polled(acct, p, startNS, measured)
		}
		switch {
		case err != nil:
			if measured {
				t.transport++
				t.fail(at, fmt.Sprintf("%s: %v", spec.Nodes[node].Name, err))
			}
		case status == fasthttp.StatusNotModified && spec.Conditional:
			// "Same as what you last saw": it shows the versions of the
			// 200 its ETag names; nothing changes in the poller's memory.
			if acct != nil && measured {
				spec.Acct.answered(acct, p, startNS, p.Shown)
			}
			if measured {
				t.notMod++
				t.lat = append(t.lat, at.Sub(sent))
				t.perNode[node]++
			}
		case status == fasthttp.StatusOK:
			body := resp.Body()
			n, serr := measure.ScanVersions(body, p.IDs, p.Versions)
			if spec.Conditional {
				p.ETag = append(p.ETag[:0], resp.Header.Peek(fasthttp.HeaderETag)...)
			}
			if acct != nil && serr == nil {
				spec.Acct.observe(acct, p, node, clock.Since(at), measured, p.Versions)
				copy(p.Shown, p.Versions)
				if measured {
					spec.Acct.answered(acct, p, startNS, p.Versions)
				}
			}
			if !measured {
				break
			}
			t.ok++
			t.lat = append(t.lat, at.Sub(sent))
			t.perNode[node]++
			t.bodyBytes += int64(len(body))
			switch {
			case serr != nil:
				t.unreadable++
				t.fail(at, fmt.Sprintf("%s: %v", spec.Nodes[node].Name, serr))
			case n < len(p.IDs):
				t.incomplete++
				t.fail(at, fmt.Sprintf("%s: %d of %d items in %s", spec.Nodes[node].Name, n, len(p.IDs), p.Path))
			}
		default:
			if measured {
				t.status[status]++
				t.fail(at, fmt.Sprintf("%s: status %d: %.200s", spec.Nodes[node].Name, status, resp.Body()))
			}
		}
		// One node (the baseline) leaves the alternation of the API
		// nodes as it was.
		next := (node + 1) % nn
		if nn > 1 {
			p.Next = next
		}
		queues[next] <- p
	}
}

func (t *connTally) fail(at time.Time, msg string) {
	if t.firstErr == "" || at.Before(t.firstErrAt) {
		t.firstErr, t.firstErrAt = msg, at
	}
}

// tallyRun sums the connections' counts over the measured time d.
func tallyRun(spec pollSpec, tallies []connTally, d time.Duration) (PollRun, error) {
	r := PollRun{Conns: spec.Conns, Seconds: measure.Round2(d.Seconds()), BadStatus: map[string]int64{}, PerNode: map[string]int64{}}
	var lat []time.Duration
	var body int64
	var firstAt time.Time
	for i := range tallies {
		t := &tallies[i]
		lat = append(lat, t.lat...)
		r.OK += t.ok
		r.NotModified += t.notMod
		r.Transport += t.transport
		r.Unreadable += t.unreadable
		r.Incomplete += t.incomplete
		body += t.bodyBytes
		for s, n := range t.status {
			r.BadStatus[strconv.Itoa(s)] += n
		}
		for k, n := range t.perNode {
			r.PerNode[spec.Nodes[k].Name] += n
		}
		if t.firstErr != "" && (r.FirstError == "" || t.firstErrAt.Before(firstAt)) {
			r.FirstError, firstAt = t.firstErr, t.firstErrAt
		}
	}
	r.Polls = r.OK + r.NotModified
	r.Errors = r.Transport + r.Unreadable + r.Incomplete
	for _, n := range r.BadStatus {
		r.Errors += n
	}
	if len(r.BadStatus) == 0 {
		r.BadStatus = nil
	}
	if len(lat) == 0 {
		names := make([]string, len(spec.Nodes))
		for k, n := range spec.Nodes {
			names[k] = n.Name
		}
		return r, fmt.Errorf("no answer from %s in %s (%d errors, first: %s)", strings.Join(names, ", "), d, r.Errors, r.FirstError)
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return measure.MS(lat[min(len(lat)-1, int(p*float64(len(lat))))]) }
	r.RPS = measure.Round2(float64(r.Polls) / d.Seconds())
	r.Frac304 = round4(float64(r.NotModified) / float64(r.Polls))
	r.P50MS, r.P90MS, r.P99MS, r.MaxMS = q(0.50), q(0.90), q(0.99), measure.MS(lat[len(lat)-1])
	if r.OK > 0 {
		r.MeanBody = measure.Round2(float64(body) / float64(r.OK))
	}
	return r, nil
}

func round4(v float64) float64 { return measure.Round2(v*100) / 100 }

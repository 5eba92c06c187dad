package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync"
	"time"
)

// MaxSnapshotIDs is the most market ids one /prices/snapshot request
// takes (after removing duplicates).
const MaxSnapshotIDs = 50

// snapshotParallel bounds the concurrent requests of one Snapshot (and of
// one Poller round): enough to overlap round trips, few enough not to
// burst through the account's window.
const snapshotParallel = 4

// Snapshot reads the prices of the markets ids names. Each id must be a
// universal id ([A-Za-z0-9_-]{1,64}): one that is not fails the call with
// an error wrapping ErrInvalidID, before any request. Duplicates are
// removed (the first occurrence keeps its place); more than MaxSnapshotIDs
// ids are split into requests of MaxSnapshotIDs, run concurrently (at most
// 4 at once), and their data and missing merged in the order asked.
//
// It is all or nothing: if one request fails (after the client's retries)
// the others are cancelled and its error is returned, never a partial
// snapshot whose absent prices would read as "missing". No ids: an empty
// Snapshot, no request.
func (c *Client) Snapshot(ctx context.Context, ids []string) (*Snapshot, error) {
	if err := checkIDs("Snapshot", ids); err != nil {
		return nil, err
	}
	chunks := chunkIDs(ids)
	parts := make([]Snapshot, len(chunks))
	err := runChunks(ctx, len(chunks), func(ctx context.Context, i int) error {
		_, err := c.snapshotChunk(ctx, chunks[i], "", &parts[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &Snapshot{Data: []Price{}, Missing: []string{}}
	for _, p := range parts {
		out.Data = append(out.Data, p.Data...)
		out.Missing = append(out.Missing, p.Missing...)
	}
	return out, nil
}

func (c *Client) snapshotChunk(ctx context.Context, ids []string, etag string, out *Snapshot) (answer, error) {
	return c.do(ctx, "/prices/snapshot", url.Values{"ids": {strings.Join(ids, ",")}}, etag, out)
}

// chunkIDs removes duplicates from ids, keeping first occurrences in
// order, and cuts the rest into chunks of MaxSnapshotIDs.
func chunkIDs(ids []string) [][]string {
	seen := make(map[string]bool, len(ids))
	var chunks [][]string
	var cur []string
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		cur = append(cur, id)
		if len(cur) == MaxSnapshotIDs {
			chunks, cur = append(chunks, cur), nil
		}
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// runChunks runs fn for 0..n-1, at most snapshotParallel at once, and
// returns the first error, cancelling the others' context.
func runChunks(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	if n == 1 {
		return fn(ctx, 0)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, snapshotParallel)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel(err) })
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// Poller polls the prices of a watchlist at an interval and hands over
// only the prices that changed since it last handed them over: a higher
// version, or the same version with other fields (a market's status or
// event can change without its price's version moving, as when it
// resolves). It sends
// If-None-Match with each chunk's last ETag, so an unchanged chunk costs
// the server a 304 and the caller nothing. Create it with NewPoller; use
// it from one goroutine.
type Poller struct {
	c        *Client
	chunks   [][]string
	interval time.Duration
	etags    []string
	// last is each market's price last handed over.
	last    map[string]*Price
	missing [][]string
}

// NewPoller returns a Poller of the markets ids names (any number:
// duplicates removed, split into requests of MaxSnapshotIDs) polled every
// interval (at least one second). An id that is not a universal id is an
// error wrapping ErrInvalidID.
func (c *Client) NewPoller(ids []string, interval time.Duration) (*Poller, error) {
	if interval < time.Second {
		return nil, fmt.Errorf("client: NewPoller: interval %v is under 1s", interval)
	}
	if err := checkIDs("NewPoller", ids); err != nil {
		return nil, err
	}
	chunks := chunkIDs(ids)
	if len(chunks) == 0 {
		return nil, errors.New("client: NewPoller: no market ids")
	}
	return &Poller{
		c: c, chunks: chunks, interval: interval,
		etags: make([]string, len(chunks)), missing: make([][]string, len(chunks)),
		last: make(map[string]*Price),
	}, nil
}

// Run polls until ctx is done or a round fails, calling changed after each
// round that found changes with those prices, in watchlist order: on the
// first round every price the snapshot has, then each price whose version
// is above the one last handed over for its market, or the same version
// with other fields (status, event, quotes, …); never a lower version nor
// a repeat. A 304 is no change. Rounds start
// every interval (the first at once); a round that takes longer delays the
// next, never overlaps it.
//
// Run returns ctx's error when ctx ends, or the error of a failed round
// (after the client's own retries: a 401, a 403, a 429 that asked for a
// wait over WithMaxRetryAfter, a 502, 503 or 504 that outlasted the
// retries). The Poller keeps what it has seen: calling Run again goes on
// from there, handing over nothing twice.
func (p *Poller) Run(ctx context.Context, changed func([]Price)) error {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		prices, err := p.Poll(ctx)
		if err != nil {
			return err
		}
		if len(prices) > 0 {
			changed(prices)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Poll runs one round now and returns the changed prices, as Run hands
// them over.
func (p *Poller) Poll(ctx context.Context) ([]Price, error) {
	parts := make([]Snapshot, len(p.chunks))
	tags := make([]string, len(p.chunks))
	fresh := make([]bool, len(p.chunks))
	err := runChunks(ctx, len(p.chunks), func(ctx context.Context, i int) error {
		a, err := p.c.snapshotChunk(ctx, p.chunks[i], p.etags[i], &parts[i])
		if err != nil {
			return err
		}
		tags[i], fresh[i] = a.etag, !a.notModified
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Price
	for i := range p.chunks {
		if !fresh[i] {
			continue
		}
		p.etags[i], p.missing[i] = tags[i], parts[i].Missing
		for j := range parts[i].Data {
			pr := &parts[i].Data[j]
			last := p.last[pr.MarketID]
			if last == nil || pr.Version > last.Version || pr.Version == last.Version && !samePrice(pr, last) {
				// A copy of its own (quotes too): neither this round's
				// answer is kept alive nor what the caller does to the
				// price it gets changes what the next round compares with.
				kept := *pr
				kept.Quotes = maps.Clone(pr.Quotes)
				p.last[pr.MarketID] = &kept
				out = append(out, *pr)
			}
		}
	}
	return out, nil
}

// Missing returns the watchlist's ids that the latest answers listed as
// missing (not served, or no price yet), in watchlist order.
func (p *Poller) Missing() []string {
	out := []string{}
	for _, m := range p.missing {
		out = append(out, m...)
	}
	return out
}

package stream

import (
	"context"
	"hash/maphash"
	"log/slog"
	"time"

	"github.com/marketdata/marketdata/internal/notice"
)

// OnChange takes a change notice (cache.Reader.OnChange). It never blocks
// and never reads: the items the notice carries of markets some connection
// here subscribes to go to their fan-out workers, which hand the same bytes
// to every subscriber; only a market the notice names without its item is
// read (the fallback). A flush, or a queue that is full (items dropped),
// makes every subscribed market be read again (resync).
func (h *Hub) OnChange(n notice.Change) {
	if n.Flush {
		h.requestResync()
		return
	}
	at := time.Now().UnixNano()
	var carried map[string]struct{}
	if len(n.Prices) > 0 && len(n.Markets) > 0 {
		carried = make(map[string]struct{}, len(n.Prices))
	}
	var byWorker [][]item
	for _, p := range n.Prices {
		if !wireObject(p.Body) && p.Body != nil {
			continue // not an item the writer can frame: read it instead
		}
		if carried != nil {
			carried[p.ID] = struct{}{}
		}
		si := h.shardOf(p.ID)
		if !h.shards[si].subscribedHere(p.ID) {
			continue
		}
		it := item{id: p.ID, rev: p.Rev, at: at}
		if p.Served {
			it.body = p.Body
		}
		if byWorker == nil {
			byWorker = make([][]item, len(h.fanq))
		}
		w := si % len(h.fanq)
		byWorker[w] = append(byWorker[w], it)
	}
	for w, items := range byWorker {
		if len(items) == 0 {
			continue
		}
		h.m.carried.Add(float64(len(items)))
		select {
		case h.fanq[w] <- items:
		default:
			h.m.dropped.Inc()
			h.requestResync()
		}
	}
	var ids []string
	for _, id := range n.Markets {
		if _, ok := carried[id]; ok {
			continue
		}
		if h.shard(id).subscribedHere(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	select {
	case h.changes <- change{ids: ids, at: at}:
	default:
		h.m.dropped.Inc()
		h.requestResync()
	}
}

// wireObject reports whether body can be a price message's fields: a JSON
// object, which the writer opens with type and seq (appendMessage).
func wireObject(body []byte) bool {
	return len(body) >= 2 && body[0] == '{'
}

// fanOutWorker fans out the items of its markets in the order their
// notices came: no read, the notice's bytes to every subscriber. It hands
// out every notice waiting in its queue before it writes (flusher.flush):
// under load the backlog is then each connection's newest version of each
// market (conflated), written together, not old notices written in turn.
func (h *Hub) fanOutWorker(ctx context.Context, q chan []item) {
	var f flusher
	for {
		var items []item
		select {
		case <-ctx.Done():
			return
		case items = <-q:
		}
		h.handOut(items, &f)
		for n := len(q); n > 0; n-- {
			h.handOut(<-q, &f)
		}
		f.flush()
	}
}

// handOut gives a notice's items of a worker's markets to their
// subscribers; f collects the connections to write.
func (h *Hub) handOut(items []item, f *flusher) {
	for _, it := range items {
		if it.body == nil {
			// Left the served set (or no price yet): a later subscribe
			// must not take the topic's old item.
			h.forgetItem(it.id, it.rev)
			continue
		}
		h.fanOut(it.id, it.rev, it.body, maphash.Bytes(h.seed, it.body), it.at, f)
	}
}

// readAndFanOut reads ids' price items and hands each newer one to its
// subscribers; at holds when each id's notice arrived (nil: a resync).
func (h *Hub) readAndFanOut(ctx context.Context, ids []string, at map[string]int64) {
	var f flusher
	for len(ids) > 0 {
		n := min(len(ids), maxRead)
		chunk := ids[:n]
		ids = ids[n:]
		rctx, cancel := context.WithTimeout(ctx, h.cfg.ReadTimeout)
		items, err := h.src.Prices(rctx, chunk)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.m.readFailures.Inc()
			h.readWarn.Log(ctx, h.log, slog.LevelWarn, "stream prices could not be read: the next resync retries", "err", err)
			h.requestResync()
			continue
		}
		h.m.read.Add(float64(len(chunk)))
		for i, it := range items {
			if !it.Shown() {
				// Left the served set (or no price yet): a later
				// subscribe must not take the topic's old item.
				h.forgetItem(chunk[i], it.Rev)
				continue
			}
			h.fanOut(chunk[i], it.Rev, it.Body, maphash.Bytes(h.seed, it.Body), at[chunk[i]], &f)
		}
		f.flush()
	}
}

// fanOut hands a market's item to its subscribers when it is newer than
// what the hub handed them last. (A subscriber whose own read on subscribe
// was older than that takes the topic's item instead: Conn.subscribe.)
func (h *Hub) fanOut(id string, rev int64, body []byte, sum uint64, at int64, f *flusher) {
	s := h.shard(id)
	s.mu.Lock()
	t := s.topics[id]
	if t == nil || rev <= t.rev {
		s.mu.Unlock()
		return
	}
	same := sum == t.sum
	t.rev, t.sum, t.body = rev, sum, body
	subs := t.subs
	s.mu.Unlock()
	if same {
		return
	}
	for _, st := range subs {
		st.deliver(rev, body, sum, at, f)
	}
}

// forgetItem drops the item a topic holds when revision rev, newer, is not
// shown.
func (h *Hub) forgetItem(id string, rev int64) {
	s := h.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.topics[id]; t != nil && rev > t.rev {
		t.rev, t.sum, t.body = rev, 0, nil
	}
}

// newest returns the newest revision of id fanned out here and its item
// (0, nil: none).
func (h *Hub) newest(id string) (int64, []byte) {
	s := h.shard(id)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if t := s.topics[id]; t != nil {
		return t.rev, t.body
	}
	return 0, nil
}

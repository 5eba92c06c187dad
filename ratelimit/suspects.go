package ratelimit

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/redisx"
)

// Suspects: the failed-authentication block must hold on every node for the
// request after the one that reached the limit, so a node cannot skip the
// block check of an address another node may be counting failures of. But
// it need not check every address: the first failure of an address's window
// is published (failOrBlockedScript), and every node checks that address,
// with its request's round trip, until the window ends. An address that
// never failed costs no check. The set is complete only while the node is
// subscribed and has read the failure counters that existed before it
// subscribed; until then (at start, after a lost connection) every address
// is checked, as if all were suspects.
type suspects struct {
	mu sync.RWMutex
	m  map[string]time.Time // address → end of its failure window (node clock)
	// sure: the set is complete (subscribed, and the counters read since).
	sure atomic.Bool
	// gen moves when the subscription is lost: a scan begun before does
	// not make the set complete.
	gen atomic.Uint64
}

func newSuspects() *suspects { return &suspects{m: map[string]time.Time{}} }

// clear reports whether addr needs no block check at now.
func (s *suspects) clear(addr string, now time.Time) bool {
	if !s.sure.Load() {
		return false
	}
	s.mu.RLock()
	until, ok := s.m[addr]
	s.mu.RUnlock()
	return !ok || !now.Before(until)
}

// add makes addr a suspect until until.
func (s *suspects) add(addr string, until time.Time) {
	s.mu.Lock()
	if until.After(s.m[addr]) {
		s.m[addr] = until
	}
	s.mu.Unlock()
}

// forgetEnded drops the suspects whose window ended by now.
func (s *suspects) forgetEnded(now time.Time) {
	s.mu.Lock()
	for a, until := range s.m {
		if !now.Before(until) {
			delete(s.m, a)
		}
	}
	s.mu.Unlock()
}

// lost says the set may miss publications from now on.
func (s *suspects) lost() {
	s.gen.Add(1)
	s.sure.Store(false)
}

func (l *Limiter) suspectsChannel() string { return l.cfg.Prefix + "af:first-failures" }

// parseSuspect reads a publication "<ms left> <address>".
func parseSuspect(payload string) (addr string, left time.Duration, ok bool) {
	ms, addr, found := strings.Cut(payload, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !found || err != nil || n <= 0 || addr == "" {
		return "", 0, false
	}
	return addr, time.Duration(n) * time.Millisecond, true
}

// suspectsPing: with nothing published for this long, the subscription is
// pinged; a ping not answered within as long again means it is lost.
const suspectsPing = 5 * time.Second

// watchSuspects follows the publications of first failures until ctx ends.
func (l *Limiter) watchSuspects(ctx context.Context) {
	for ctx.Err() == nil {
		l.followSuspects(ctx)
		l.suspects.lost()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// followSuspects runs one subscription until it is lost or ctx ends.
func (l *Limiter) followSuspects(ctx context.Context) {
	ps := l.rdb.Subscribe(ctx, l.suspectsChannel())
	defer ps.Close() //nolint:errcheck // a lost subscription is what ends the loop; nothing to do with its close error
	pinged := false
	lastSweep := time.Now()
	for {
		msg, err := ps.ReceiveTimeout(ctx, suspectsPing)
		if now := time.Now(); now.Sub(lastSweep) > time.Minute {
			l.suspects.forgetEnded(now)
			lastSweep = now
		}
		var ne net.Error
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &ne) && ne.Timeout():
			if pinged {
				return // the connection is gone without an error
			}
			if ps.Ping(ctx) != nil {
				return
			}
			pinged = true
			continue
		case err != nil:
			return // go-redis reconnects on the next Receive; the set may have missed some meanwhile
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				// (Re)subscribed: publications from now on arrive; read the
				// counters that exist, then the set is complete.
				l.suspects.lost()
				go l.scanSuspects(ctx, l.suspects.gen.Load())
			}
		case *redis.Message:
			if addr, left, ok := parseSuspect(m.Payload); ok {
				if l.hearDelay > 0 {
					time.Sleep(l.hearDelay)
				}
				l.suspects.add(addr, time.Now().Add(left))
				l.suspectsHeard.Add(1)
				select {
				case l.heard <- heardAck{addr: addr, left: left}:
				default: // confirmHeard is behind: the node that counts waits out heardWait
				}
			}
		}
	}
}

// scanSuspects reads every address's failure counter into the set and
// then, unless the subscription was lost meanwhile (gen moved), makes the
// set complete. It retries until it succeeds or is outdated.
func (l *Limiter) scanSuspects(ctx context.Context, gen uint64) {
	for ctx.Err() == nil && l.suspects.gen.Load() == gen {
		if err := l.readSuspects(ctx); err == nil {
			if l.suspects.gen.Load() == gen {
				l.suspects.sure.Store(true)
			}
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// readSuspects adds every address with a failure counter, on every master.
func (l *Limiter) readSuspects(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	prefix := l.cfg.Prefix + "{af:"
	var keys []string
	if err := redisx.ScanKeys(ctx, l.rdb, redisx.EscapeGlob(prefix)+"*}", func(k string) error {
		keys = append(keys, k)
		return nil
	}); err != nil {
		return err
	}
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), 500)]
		keys = keys[len(chunk):]
		p := l.rdb.Pipeline()
		cmds := make([]*redis.DurationCmd, len(chunk))
		for i, k := range chunk {
			cmds[i] = p.PTTL(ctx, k)
		}
		if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		now := time.Now()
		for i, k := range chunk {
			if ttl := cmds[i].Val(); ttl > 0 && strings.HasPrefix(k, prefix) {
				l.suspects.add(k[len(prefix):len(k)-1], now.Add(ttl))
			}
		}
	}
	return nil
}

// The window a publication leaves: another node checks an address once it
// has heard of it, a pub/sub delivery and a goroutine's turn after the first
// failure, which on a saturated machine can take longer than the remaining
// failures. So every node confirms what it heard, in a set per address
// (heardKey, with the counter's hash tag and window), and the failure that
// reaches the limit waits until the set has as many nodes as the channel
// has subscribers (awaitHeard). A node not subscribed checks every address
// (its set is not complete), so it need not confirm anything.

// heardAck is an address this node heard of, with its window's time left.
type heardAck struct {
	addr string
	left time.Duration
}

// heardQueue bounds the confirmations waiting to be sent; past it one is
// dropped (the failure that reaches the limit then waits out heardWait).
const heardQueue = 4096

// heardWait bounds how long the failure that reaches the limit waits for the
// confirmations: past it, it is answered and counted as unconfirmed.
const heardWait = time.Second

// confirmHeard records this node in the heard set of each address it heard
// of, the waiting ones together in one round trip, until ctx ends.
func (l *Limiter) confirmHeard(ctx context.Context) {
	for {
		var first heardAck
		select {
		case <-ctx.Done():
			return
		case first = <-l.heard:
		}
		acks := []heardAck{first}
	drain:
		for len(acks) < 500 {
			select {
			case a := <-l.heard:
				acks = append(acks, a)
			default:
				break drain
			}
		}
		// Once more after a failure (a reconnect, a moved slot); past that
		// the node that counts waits out heardWait and counts it.
		for try := range 2 {
			p := l.rdb.Pipeline()
			for _, a := range acks {
				key := l.heardKey(a.addr)
				p.SAdd(ctx, key, l.id)
				p.PExpire(ctx, key, a.left)
			}
			tctx, cancel := context.WithTimeout(ctx, heardWait/4)
			_, err := p.Exec(tctx)
			cancel()
			if err == nil || try == 1 || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// awaitHeard waits, up to heardWait, until every subscriber of the first
// failures has confirmed it heard of addr. Without Run (no subscriber, every
// address checked) there is nothing to wait for.
func (l *Limiter) awaitHeard(ctx context.Context, addr string) {
	if !l.running.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, heardWait)
	defer cancel()
	pause := time.Millisecond
	for {
		heard, err := l.rdb.SCard(ctx, l.heardKey(addr)).Result()
		if err == nil {
			if subs, err := l.subscribers(ctx); err == nil && heard >= subs {
				return
			}
		}
		select {
		case <-ctx.Done():
			l.unconfirmed.Add(1)
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// subscribers counts the subscriptions to the first failures' channel: on
// Redis Cluster a plain PUBLISH reaches every node's subscribers, so they
// are summed over every node (go-redis subscribes on the master of the
// channel's slot, but a node may still hold subscriptions made before a
// failover or a slot's move). A node that does not answer counts none: its
// subscribers cannot hear anything either. It fails only when no node
// answers.
func (l *Limiter) subscribers(ctx context.Context) (int64, error) {
	ch := l.suspectsChannel()
	c, ok := l.rdb.(shardedClient)
	if !ok {
		n, err := l.rdb.PubSubNumSub(ctx, ch).Result()
		return n[ch], err
	}
	var sum, answered atomic.Int64
	c.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error { //nolint:errcheck // the callback never fails: a node that does not answer counts none
		if n, err := node.PubSubNumSub(ctx, ch).Result(); err == nil {
			sum.Add(n[ch])
			answered.Add(1)
		}
		return nil
	})
	if answered.Load() == 0 {
		return 0, errors.New("ratelimit: no Redis node answered PUBSUB NUMSUB")
	}
	return sum.Load(), nil
}

// shardedClient is a Redis Cluster client: *redis.ClusterClient, or a type
// that embeds one (redisx.Cluster).
type shardedClient interface {
	ForEachShard(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
}

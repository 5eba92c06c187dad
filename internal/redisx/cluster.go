package redisx

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timeouts of every Redis client Open makes: a dead node is given up on in
// about a second instead of go-redis' 5 s, so callers fall back quickly.
const (
	dialTimeout  = time.Second
	ioTimeout    = 2 * time.Second
	poolTimeout  = 2 * time.Second
	minIdleConns = 2
)

// How the failover watcher of a Cluster polls: every watchSteady while all is
// well, every watchAlert while errors were seen in the last errorMemory.
const (
	watchSteady = time.Second
	watchAlert  = 300 * time.Millisecond
	errorMemory = 30 * time.Second
)

// Cluster is a Redis Cluster client that follows failovers by itself.
// go-redis reloads its slot map only on a MOVED answer or every 60 s, so
// after a master dies it keeps dialling the dead address until then. One
// watcher goroutine per Cluster reads CLUSTER NODES every second (every
// 300 ms while commands fail) and reloads the slot map when the masters
// change or commands failed recently; it also counts the nodes reported
// down. Close stops it.
type Cluster struct {
	*redis.ClusterClient

	opt      *redis.ClusterOptions
	lastErr  atomic.Int64 // unix nanoseconds of the last failed command
	down     atomic.Int64 // nodes CLUSTER NODES reports failed, -1 when none answers
	changes  atomic.Uint64
	log      atomic.Pointer[slog.Logger]
	changed  chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once

	mu     sync.Mutex
	probes map[string]*redis.Client // one small client per known node address
	last   string                   // the last node that answered CLUSTER NODES
	view   clusterView
}

// clusterView is what the watcher last read from CLUSTER NODES.
type clusterView struct {
	// masters is a fingerprint of which live master serves which slots.
	masters string
	// down holds the addresses of nodes reported failed, and their role.
	down map[string]string
	// addrs are every node's address.
	addrs []string
}

// newCluster returns a client for opt and starts its watcher. opt is used
// as it is: ParseURL gives it the process's timeouts.
func newCluster(opt *redis.ClusterOptions) *Cluster {
	c := &Cluster{
		ClusterClient: redis.NewClusterClient(opt),
		opt:           opt,
		changed:       make(chan struct{}, 1),
		stop:          make(chan struct{}),
		stopped:       make(chan struct{}),
		probes:        map[string]*redis.Client{},
	}
	c.AddHook(errorHook{c})
	go c.watch()
	return c
}

func clusterDefaults(opt *redis.ClusterOptions) {
	clientDefaults(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout)
	if opt.MinIdleConns == 0 {
		opt.MinIdleConns = minIdleConns
	}
	if opt.MaxRedirects == 0 {
		opt.MaxRedirects = 3
	}
	// The watcher reloads on change; this is only the backstop.
	if opt.ClusterStateReloadInterval == 0 {
		opt.ClusterStateReloadInterval = 10 * time.Second
	}
}

// Close stops the watcher and closes the client. Closing twice is not an
// error.
func (c *Cluster) Close() error {
	var err error
	c.stopOnce.Do(func() {
		close(c.stop)
		<-c.stopped
		c.mu.Lock()
		for _, p := range c.probes {
			p.Close()
		}
		c.probes = map[string]*redis.Client{}
		c.mu.Unlock()
		err = c.ClusterClient.Close()
	})
	return err
}

// SetLogger makes the watcher log what it sees: masters changing, nodes
// going down or coming back. Without it the watcher is silent.
func (c *Cluster) SetLogger(log *slog.Logger) { c.log.Store(log) }

// Changed receives a value after the masters serving the slots changed (a
// failover, a resharding); one value stands for any number of changes.
func (c *Cluster) Changed() <-chan struct{} { return c.changed }

// Changes counts the changes of masters seen since the client was opened.
func (c *Cluster) Changes() uint64 { return c.changes.Load() }

// NodesDown is how many nodes the cluster reports failed at the watcher's
// last look, or -1 when no node answered it.
func (c *Cluster) NodesDown() int { return int(c.down.Load()) }

// noteError records a failed command that may mean the topology moved (the
// watcher looks harder for a while). A timeout after the caller's context
// ended is the caller's deadline, not the cluster's trouble; a refused dial
// or a dropped connection is trouble even then. (go-redis retries a refused
// dial after a 100 ms backoff, so with the rate limiter's 50 ms budget
// nearly every failure against a dead master arrives after the context
// ended: ignoring them left the watcher in its steady poll during a
// failover, with one reload per change of masters.)
func (c *Cluster) noteError(ctx context.Context, err error) {
	if !clusterTrouble(err) {
		return
	}
	if ctx.Err() != nil && isTimeout(err) {
		return
	}
	c.markTrouble()
}

// markTrouble makes the watcher poll every watchAlert and reload the slot
// map at each look, for errorMemory from now.
func (c *Cluster) markTrouble() { c.lastErr.Store(time.Now().UnixNano()) }

func (c *Cluster) troubled() bool {
	last := c.lastErr.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < errorMemory
}

func (c *Cluster) watch() {
	defer close(c.stopped)
	for {
		wait := watchSteady
		if c.troubled() {
			wait = watchAlert
		}
		select {
		case <-c.stop:
			return
		case <-time.After(wait):
		}
		c.look()
	}
}

// look reads the topology once and reloads the slot map when it changed or
// commands failed recently.
func (c *Cluster) look() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*dialTimeout)
	defer cancel()
	view, ok := c.readView(ctx)
	reload := c.troubled()
	log := c.log.Load()
	if !ok {
		if c.down.Swap(-1) != -1 && log != nil {
			log.Warn("redis cluster: no node answers CLUSTER NODES")
		}
	} else {
		c.down.Store(int64(len(view.down)))
		c.mu.Lock()
		prev := c.view
		c.view = view
		c.mu.Unlock()
		if log != nil && !maps.Equal(prev.down, view.down) {
			log.Warn("redis cluster: nodes down changed", "down", fmt.Sprint(view.down), "nodes_down", len(view.down))
		}
		if prev.masters != "" && prev.masters != view.masters {
			if log != nil {
				log.Warn("redis cluster: masters changed; reloading the slot map", "masters", strings.ReplaceAll(view.masters, "\n", "; "))
			}
			reload = true
			// One reload may read a node that has not yet heard of the
			// change (or be folded into a reload already running): keep
			// reloading at each alert look for a while, so that a stale
			// slot map lasts one watchAlert, not until go-redis' own
			// ClusterStateReloadInterval.
			c.markTrouble()
			c.changes.Add(1)
			select {
			case c.changed <- struct{}{}:
			default:
			}
		}
	}
	if reload {
		c.ReloadState(ctx)
	}
}

// readView asks the known nodes, the last one that answered first, for
// CLUSTER NODES, until one answers.
func (c *Cluster) readView(ctx context.Context) (clusterView, bool) {
	c.mu.Lock()
	addrs := slices.Clone(c.view.addrs)
	last := c.last
	c.mu.Unlock()
	for _, a := range c.opt.Addrs {
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if i := slices.Index(addrs, last); i > 0 {
		addrs[0], addrs[i] = addrs[i], addrs[0]
	}
	for _, a := range addrs {
		out, err := c.probe(a).ClusterNodes(ctx).Result()
		if err != nil {
			continue
		}
		view := parseView(out)
		c.mu.Lock()
		c.last = a
		c.mu.Unlock()
		c.pruneProbes(view.addrs)
		return view, true
	}
	return clusterView{}, false
}

// pruneProbes closes the probes of addresses that are neither in the
// cluster's view nor configured: a node that left or moved.
func (c *Cluster) pruneProbes(addrs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, p := range c.probes {
		if !slices.Contains(addrs, a) && !slices.Contains(c.opt.Addrs, a) {
			p.Close()
			delete(c.probes, a)
		}
	}
}

// probeAddrs returns the addresses the watcher holds a probe for, sorted.
func (c *Cluster) probeAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.probes))
}

// probe returns the watcher's own one-connection client for addr, with the
// cluster's credentials and TLS.
func (c *Cluster) probe(addr string) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.probes[addr]; ok {
		return p
	}
	opt := &redis.Options{
		Addr: addr, Username: c.opt.Username, Password: c.opt.Password,
		CredentialsProvider: c.opt.CredentialsProvider, TLSConfig: c.opt.TLSConfig,
		DialTimeout: dialTimeout, ReadTimeout: dialTimeout, WriteTimeout: dialTimeout,
		PoolSize: 1, MaxRetries: -1,
	}
	if opt.TLSConfig != nil && opt.TLSConfig.ServerName == "" {
		opt.TLSConfig = opt.TLSConfig.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			opt.TLSConfig.ServerName = host
		}
	}
	p := redis.NewClient(opt)
	c.probes[addr] = p
	return p
}

// parseView reads the output of CLUSTER NODES.
func parseView(out string) clusterView {
	v := clusterView{down: map[string]string{}}
	var masters []string
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		if addr == "" || strings.HasPrefix(addr, ":") {
			continue // a node that never said where it listens
		}
		v.addrs = append(v.addrs, addr)
		flags := strings.Split(f[2], ",")
		master := slices.Contains(flags, "master")
		failed := slices.Contains(flags, "fail") || slices.Contains(flags, "fail?")
		role := "replica"
		switch {
		case master && len(f) > 8:
			role = "master serving slots"
		case master:
			role = "master"
		}
		switch {
		case failed:
			v.down[addr] = role
		case master && len(f) > 8:
			masters = append(masters, addr+" "+strings.Join(f[8:], " "))
		}
	}
	slices.Sort(masters)
	slices.Sort(v.addrs)
	v.masters = strings.Join(masters, "\n")
	return v
}

// errorHook tells the Cluster about failed commands.
type errorHook struct{ c *Cluster }

func (h errorHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		h.c.noteError(ctx, err)
		return conn, err
	}
}

func (h errorHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.c.noteError(ctx, err)
		return err
	}
}

func (h errorHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.c.noteError(ctx, err)
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				h.c.noteError(ctx, e)
				break
			}
		}
		return err
	}
}

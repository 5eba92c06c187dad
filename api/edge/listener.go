package edge

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Accept backs off this long after a refused accept, doubling up to
// acceptBackoffMax; a connection closing ends the wait at once.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	// acceptLogEvery bounds the warnings of one cause (out of file
	// descriptors, at MD_MAX_CONNS) to one per this period.
	acceptLogEvery = 10 * time.Second
)

// Metrics are the edge's counters, registered once per Server.
type Metrics struct {
	open         prometheus.Gauge
	max          prometheus.Gauge
	acceptErrors *prometheus.CounterVec
	capWaits     prometheus.Counter
}

func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		open: f.NewGauge(prometheus.GaugeOpts{
			Name: "marketdata_http_connections_open", Help: "Open client connections of this API node.",
		}),
		max: f.NewGauge(prometheus.GaugeOpts{
			Name: "marketdata_http_connections_max", Help: "MD_MAX_CONNS: the cap on open client connections.",
		}),
		acceptErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "marketdata_http_accept_errors_total",
			Help: "Accepts refused by the system (reason: emfile, enfile, enobufs, enomem, other), each retried after a wait.",
		}, []string{"reason"}),
		capWaits: f.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_http_accept_cap_waits_total",
			Help: "Times the node stopped accepting because MD_MAX_CONNS connections were open.",
		}),
	}
}

// Listener is the node's listener: at most max connections are open at
// once (at the cap it stops accepting, and new clients wait in the kernel's
// backlog until one closes), and an accept the system refuses for want of
// resources (file descriptors, buffers, memory) is retried after a wait
// instead of ending Serve, which would end the process. Every connection
// it gives out is an Conn.
type Listener struct {
	net.Listener
	slots          chan struct{}
	freed          chan struct{}
	done           chan struct{}
	closeOnce      sync.Once
	requestTimeout time.Duration
	idleTimeout    time.Duration
	metrics        *Metrics
	log            *slog.Logger
	// Accept runs on one goroutine (the server's accept loop): the episode
	// state needs no lock.
	refused episode
	atCap   episode
}

// episode is one stretch of refusals of one cause, logged when it starts
// (at most once per acceptLogEvery) and when it ends if its start was.
type episode struct {
	active bool
	logged bool
	since  time.Time
	count  int
	last   time.Time
}

func NewListener(ln net.Listener, maxConns int, requestTimeout, idleTimeout time.Duration, m *Metrics, log *slog.Logger) *Listener {
	m.max.Set(float64(maxConns))
	return &Listener{
		Listener: ln, slots: make(chan struct{}, maxConns), freed: make(chan struct{}, 1),
		done: make(chan struct{}), requestTimeout: requestTimeout, idleTimeout: idleTimeout,
		metrics: m, log: log,
	}
}

// Accept waits for a free place under the cap, then for a connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.metrics.capWaits.Inc()
		if l.atCap.begin() {
			l.log.Warn("api at MD_MAX_CONNS: not accepting new connections until some close",
				"max_conns", cap(l.slots))
		}
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		if count, since, logged := l.atCap.end(); logged {
			l.log.Info("api below MD_MAX_CONNS again: accepting", "waits", count, "seconds", int(since.Seconds()))
		}
	}
	wait := time.Duration(0)
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if count, since, logged := l.refused.end(); logged {
				l.log.Info("api accepting connections again", "refused_accepts", count, "seconds", int(since.Seconds()))
			}
			l.metrics.open.Inc()
			return newConn(c, l.requestTimeout, l.idleTimeout, l.release), nil
		}
		reason, retry := acceptErrorReason(err)
		if !retry {
			<-l.slots
			return nil, err
		}
		l.metrics.acceptErrors.WithLabelValues(reason).Inc()
		if l.refused.begin() {
			l.log.Warn("api cannot accept connections: "+acceptErrorText(reason)+"; refusing new connections until some close",
				"reason", reason, "open_connections", len(l.slots)-1, "err", err)
		}
		wait = min(max(2*wait, acceptBackoffMin), acceptBackoffMax)
		if !sleep(wait, l.freed, l.done) {
			<-l.slots
			return nil, net.ErrClosed
		}
	}
}

// release frees a closed connection's place and wakes an accept that waits
// for resources: the closed connection's descriptor is free now.
func (l *Listener) release() {
	<-l.slots
	l.metrics.open.Dec()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// Close stops accepting; connections already open stay open.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// sleep waits d, or until wake or done; it reports false when done.
func sleep(d time.Duration, wake <-chan struct{}, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	case <-done:
		return false
	}
	return true
}

// acceptErrorReason names an accept error and tells whether it passes: the
// system out of descriptors, buffers or memory, or any error the network
// stack calls temporary. Anything else (the listener closed) ends Serve.
func acceptErrorReason(err error) (string, bool) {
	switch {
	case errors.Is(err, net.ErrClosed):
		return "", false
	case errors.Is(err, syscall.EMFILE):
		return "emfile", true
	case errors.Is(err, syscall.ENFILE):
		return "enfile", true
	case errors.Is(err, syscall.ENOBUFS):
		return "enobufs", true
	case errors.Is(err, syscall.ENOMEM):
		return "enomem", true
	}
	var ne interface{ Temporary() bool }
	if errors.As(err, &ne) && ne.Temporary() {
		return "other", true
	}
	return "", false
}

func acceptErrorText(reason string) string {
	switch reason {
	case "emfile":
		return "out of file descriptors (RLIMIT_NOFILE)"
	case "enfile":
		return "the system is out of file descriptors"
	case "enobufs", "enomem":
		return "out of memory for connections"
	}
	return "temporary accept error"
}

// begin starts an episode (or continues it) and reports whether to log it.
func (e *episode) begin() bool {
	e.count++
	if e.active {
		return false
	}
	now := time.Now()
	e.active, e.since, e.count = true, now, 1
	e.logged = now.Sub(e.last) >= acceptLogEvery
	if e.logged {
		e.last = now
	}
	return e.logged
}

// end closes an episode: how many refusals, how long, and whether its start
// was logged (then its end is too).
func (e *episode) end() (int, time.Duration, bool) {
	if !e.active {
		return 0, 0, false
	}
	e.active = false
	return e.count, time.Since(e.since), e.logged
}

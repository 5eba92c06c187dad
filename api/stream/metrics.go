package stream

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a hub's counters; Register exposes them.
type metrics struct {
	open          prometheus.Gauge
	conflated     prometheus.Counter
	commandErrors prometheus.Counter
	readFailures  prometheus.Counter
	resyncs       prometheus.Counter
	dropped       prometheus.Counter
	carried       prometheus.Counter
	read          prometheus.Counter
	writes        prometheus.Counter
	messages      *prometheus.CounterVec
	prices        prometheus.Counter
	closes        *prometheus.CounterVec
	fanOut        prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "marketdata_streams_open", Help: "WebSocket streams open on this node.",
		}),
		conflated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_stream_conflated_total", Help: "Price versions replaced by a newer one of the same market before a slow client took them.",
		}),
		commandErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_stream_command_errors_total", Help: "Client commands refused as malformed (answered with an error message).",
		}),
		readFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_stream_read_failures_total", Help: "Fan-out reads of changed markets that failed (the next resync reads them again).",
		}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_stream_resyncs_total", Help: "Reads of every subscribed market on this node (every 2 s, and after a flush or a lost notice).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_stream_changes_dropped_total", Help: "Change notices the fan-out queue had no room for (a resync follows at once).",
		}),
		carried: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_stream_items_carried_total", Help: "Price items of subscribed markets fanned out from the bytes their change notice carried (no read).",
		}),
		read: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_stream_items_read_total", Help: "Price items of subscribed markets read through the read path to be fanned out (a notice without the item, a resync).",
		}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marketdata_stream_writes_total", Help: "Writes to stream sockets: each carries every frame that waited, up to 4 KiB.",
		}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marketdata_stream_messages_total", Help: "Messages written to streams, by type.",
		}, []string{"type"}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marketdata_stream_closes_total", Help: "Streams closed by the node, by close code.",
		}, []string{"code"}),
		fanOut: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "marketdata_stream_fanout_seconds",
			Help:    "From a change notice's arrival at the node to its price message written to a stream.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	m.prices = m.messages.WithLabelValues("price")
	return m
}

// Register adds the hub's metrics to reg.
func (h *Hub) Register(reg prometheus.Registerer) error {
	m := h.m
	for _, c := range []prometheus.Collector{m.open, m.conflated, m.commandErrors, m.readFailures, m.resyncs, m.dropped, m.carried, m.read, m.writes, m.messages, m.closes, m.fanOut} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *metrics) sent(typ string) { m.messages.WithLabelValues(typ).Inc() }

func (m *metrics) sentPrice(at int64) {
	m.prices.Inc()
	if at != 0 {
		m.fanOut.Observe(time.Duration(time.Now().UnixNano() - at).Seconds())
	}
}

func (m *metrics) closed(code int) { m.closes.WithLabelValues(strconv.Itoa(code)).Inc() }

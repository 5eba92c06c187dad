package cache

import "github.com/prometheus/client_golang/prometheus"

// resource and layer label marketdata_reads_total.
type (
	resource int
	layer    int
)

const (
	resPrices resource = iota
	resEvent
	resTrades
	resPage
	resSummaries
	numResources
)

const (
	layerReplica layer = iota
	layerMemory
	layerRedis
	layerStore
	numLayers
)

var (
	resourceNames = [numResources]string{"prices", "event", "trades", "page", "summaries"}
	layerNames    = [numLayers]string{"replica", "memory", "redis", "store"}
)

// metrics creates the Reader's counters; Register adds them to a registry.
func (r *Reader) metrics() {
	r.reads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketdata_reads_total",
		Help: "Data reads by resource and the layer that answered them: the node's price replica, node memory, Redis or the store (Postgres). Price reads count items, the others requests.",
	}, []string{"resource", "layer"})
	for res := range numResources {
		for l := range numLayers {
			// Resolved once: the hot path adds to a counter, no label lookup.
			r.readsAt[res][l] = r.reads.WithLabelValues(resourceNames[res], layerNames[l])
		}
	}
	r.lost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "marketdata_read_notices_lost_total",
		Help: "Change numbers whose notice never reached this node within the wait: each time, node memory was dropped.",
	})
	r.replicaLoads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "marketdata_replica_loads_total",
		Help: "Times the node loaded its price replica from Redis whole (start, lost notices, flush, NATS reconnect).",
	})
	r.orderWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "marketdata_replica_order_waits_total",
		Help: "Reads whose If-None-Match named a position the replica had not reached within the order wait: answered from Redis.",
	})
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	r.collectors = []prometheus.Collector{r.reads, r.lost, r.replicaLoads, r.orderWaits,
		gauge("marketdata_replica_ready", "1 while the node's price replica is whole and answers.", func() float64 {
			if r.ReplicaReady() {
				return 1
			}
			return 0
		}),
		gauge("marketdata_replica_items", "Price items in the node's replica.", func() float64 {
			if r.rep == nil {
				return 0
			}
			return float64(r.rep.items.Load())
		}),
		gauge("marketdata_replica_bytes", "Approximate bytes of the node's price replica (ids, bodies, entries).", func() float64 {
			if r.rep == nil {
				return 0
			}
			return float64(r.rep.bytes.Load())
		}),
	}
}

// count records n reads of res answered by l.
func (r *Reader) count(res resource, l layer, n int) {
	if n > 0 {
		r.readsAt[res][l].Add(float64(n))
	}
}

// Register adds the Reader's metrics to reg.
func (r *Reader) Register(reg prometheus.Registerer) error {
	for _, c := range r.collectors {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

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
	layerMemory layer = iota
	layerRedis
	layerStore
	numLayers
)

var (
	resourceNames = [numResources]string{"prices", "event", "trades", "page", "summaries"}
	layerNames    = [numLayers]string{"memory", "redis", "store"}
)

// metrics creates the Reader's counters; Register adds them to a registry.
func (r *Reader) metrics() {
	r.reads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marketdata_reads_total",
		Help: "Data reads by resource and the layer that answered them: node memory, Redis or the store (Postgres). Price reads count items, the others requests.",
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
	r.collectors = []prometheus.Collector{r.reads, r.lost}
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

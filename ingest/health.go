package ingest

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// StreamHealth asks JetStream about the update stream, the shared consumer
// and the reject stream, sets the replica gauges, and tells /readyz what it
// found. err: the update stream or the consumer does not answer, or the
// stream has no leader (its only node died, say): ingest is not ready, as it
// receives nothing. degraded (ready, but to report): fewer live copies than
// wanted (Config.Replicas) of a stream or of the consumer, or a reject
// stream that does not answer (rejects then are in ingest_rejects only).
// Empty degraded and nil err: all is well.
func (w *Worker) StreamHealth(ctx context.Context) (degraded string, err error) {
	want := w.cfg.Replicas
	var notes []string
	s, err := w.js.Stream(ctx, w.cfg.Stream)
	if err != nil {
		w.setReplicas(w.cfg.Stream, 0)
		return "", fmt.Errorf("ingest: stream %s does not answer: %w", w.cfg.Stream, err)
	}
	info := s.CachedInfo()
	live := liveReplicas(info)
	w.setReplicas(w.cfg.Stream, live)
	if live == 0 {
		return "", fmt.Errorf("ingest: stream %s has no leader", w.cfg.Stream)
	}
	if n := short(w.cfg.Stream, live, info.Config.Replicas, want, standalone(info.Cluster)); n != "" {
		notes = append(notes, n)
	}

	c, err := w.js.Consumer(ctx, w.cfg.Stream, w.cfg.Consumer)
	if err != nil {
		return "", fmt.Errorf("ingest: consumer %s on %s does not answer: %w", w.cfg.Consumer, w.cfg.Stream, err)
	}
	ci := c.CachedInfo()
	if ci.Cluster != nil && ci.Cluster.Leader == "" {
		return "", fmt.Errorf("ingest: consumer %s on %s has no leader", w.cfg.Consumer, w.cfg.Stream)
	}
	if n := liveOf(ci.Cluster); !standalone(ci.Cluster) && n < want {
		notes = append(notes, fmt.Sprintf("consumer %s has %d of %d replicas", w.cfg.Consumer, n, want))
	}

	d, err := w.js.Stream(ctx, w.cfg.DLQStream)
	if err != nil {
		w.setReplicas(w.cfg.DLQStream, 0)
		notes = append(notes, fmt.Sprintf("reject stream %s does not answer (rejects are kept in ingest_rejects only): %v", w.cfg.DLQStream, err))
	} else {
		dinfo := d.CachedInfo()
		dlive := liveReplicas(dinfo)
		w.setReplicas(w.cfg.DLQStream, dlive)
		if n := short(w.cfg.DLQStream, dlive, dinfo.Config.Replicas, want, standalone(dinfo.Cluster)); n != "" {
			notes = append(notes, n)
		}
	}
	return strings.Join(notes, "; "), nil
}

// short describes a stream with fewer live copies than wanted ("" if none).
func short(stream string, live, configured, want int, single bool) string {
	switch {
	case live >= want:
		return ""
	case single:
		return fmt.Sprintf("stream %s has 1 of %d replicas: the NATS server is not clustered", stream, want)
	case configured < want:
		return fmt.Sprintf("stream %s is configured with %d of %d replicas", stream, configured, want)
	default:
		return fmt.Sprintf("stream %s has %d of %d replicas current", stream, live, want)
	}
}

func (w *Worker) setReplicas(stream string, live int) {
	if w.metrics == nil || w.metrics.StreamReplicas == nil {
		return
	}
	w.metrics.StreamReplicas.WithLabelValues(stream).Set(float64(live))
	w.metrics.StreamReplicasWanted.WithLabelValues(stream).Set(float64(w.cfg.Replicas))
}

// streamCheckEvery is how often the worker looks at its streams.
const streamCheckEvery = 10 * time.Second

// watchStreams runs StreamHealth every streamCheckEvery while ctx lasts, so
// the replica gauges stay current, and logs each change of what it finds:
// WARN when a stream stops answering, loses its leader or runs short of
// replicas, INFO when all is well again. The state at start is not logged
// again (EnsureStreams has said it) unless it is an error.
func (w *Worker) watchStreams(ctx context.Context) {
	t := time.NewTicker(streamCheckEvery)
	defer t.Stop()
	prev, first := "", true
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		degraded, err := w.StreamHealth(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		state := degraded
		if err != nil {
			state = "not ready: " + err.Error()
		}
		switch {
		case state == prev:
		case err != nil:
			w.log.Warn("ingest stream does not answer; not ready", "stream", w.cfg.Stream, "consumer", w.cfg.Consumer, "err", err)
		case degraded != "" && !first:
			w.log.Warn("ingest stream degraded", "stream", w.cfg.Stream, "degraded", degraded)
		case degraded == "" && !first:
			w.log.Info("ingest streams healthy again", "stream", w.cfg.Stream, "replicas", w.cfg.Replicas)
		}
		prev, first = state, false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

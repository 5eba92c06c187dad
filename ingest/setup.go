package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// streamConfigs are the update and reject streams of cfg.
func streamConfigs(cfg Config) []jetstream.StreamConfig {
	return []jetstream.StreamConfig{{
		Name:        cfg.Stream,
		Description: "Matched-event updates from upstream matchers (marketdata contract §4).",
		Subjects:    []string{cfg.SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.MaxAge,
		Duplicates:  2 * time.Minute,
	}, {
		Name:        cfg.DLQStream,
		Description: "Ingest messages rejected as invalid or out of deliveries, with the reason in header Md-Reject-Reason.",
		Subjects:    []string{cfg.DLQPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      30 * 24 * time.Hour,
	}}
}

// EnsureStreams creates the update and reject streams when absent, with
// cfg.Replicas replicas; `ingest` and `feed` both call it. An existing stream
// with fewer replicas is raised on a NATS cluster (JetStream adds the
// replicas and copies the data in the background). What cannot be had is
// logged at WARN with the stream, the configured and the actual replicas,
// never silently kept (log nil: not logged, for tests): a single server keeps one copy whatever is asked
// (it refuses to create a stream with more, so the stream is created with
// one), and a cluster may refuse the raise (too few servers). Only a stream
// that cannot be created or read is an error.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg Config, log *slog.Logger) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, sc := range streamConfigs(cfg) {
		if err := ensureStream(ctx, js, sc, log); err != nil {
			return err
		}
	}
	return nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig, log *slog.Logger) error {
	want := sc.Replicas
	s, err := js.Stream(ctx, sc.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, sc)
		if isReplicasNotSupported(err) {
			// A single server: one copy is all there can be. Run on it, and
			// say so, rather than refuse to start.
			one := sc
			one.Replicas = 1
			s, err = js.CreateStream(ctx, one)
			if err == nil {
				warnShort(log, sc.Name, want, 1, 1, reasonNotClustered)
				return nil
			}
		}
		switch {
		case err == nil:
			log.Info("stream created", "stream", sc.Name, "replicas", sc.Replicas)
			return nil
		case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
			// Another process created it meanwhile: check it as any other.
			s, err = js.Stream(ctx, sc.Name)
		}
	}
	if err != nil {
		return fmt.Errorf("ingest: stream %s: %w", sc.Name, err)
	}
	info := s.CachedInfo()
	configured, live := info.Config.Replicas, liveReplicas(info)
	if configured >= want && live >= want {
		return nil
	}
	reason := reasonNotClustered
	if !standalone(info.Cluster) {
		if configured < want {
			raised := info.Config
			raised.Replicas = want
			_, err := js.UpdateStream(ctx, raised)
			if err == nil {
				log.Info("stream replicas raised; the new replicas catch up in the background",
					"stream", sc.Name, "replicas_wanted", want, "replicas", configured)
				return nil
			}
			reason = "raising the replicas was refused: " + err.Error()
		} else {
			reason = "some replicas are offline or behind"
		}
	}
	warnShort(log, sc.Name, want, configured, live, reason)
	return nil
}

const reasonNotClustered = "the NATS server is not clustered: a single server keeps one copy (set MD_STREAM_REPLICAS=1 there, 3 on a NATS cluster)"

func warnShort(log *slog.Logger, stream string, want, configured, live int, reason string) {
	log.Warn("stream has fewer replicas than configured", "stream", stream,
		"replicas_wanted", want, "replicas", live, "replicas_configured", configured, "reason", reason)
}

// isReplicasNotSupported reports the refusal of a single server to create a
// stream with more than one replica.
func isReplicasNotSupported(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrReplicasNotSupported
}

// jsErrReplicasNotSupported is JetStream's "replicas > 1 not supported in
// non-clustered mode" (nats-server JSStreamReplicasNotSupportedErr).
const jsErrReplicasNotSupported jetstream.ErrorCode = 10074

// liveReplicas counts the copies of a stream that are there now: its
// leader and the replicas that are current; a stream without a leader has
// none that serves. A single server keeps exactly one copy, whatever the
// configuration says.
func liveReplicas(info *jetstream.StreamInfo) int {
	return liveOf(info.Cluster)
}

// liveOf counts a leader and its current replicas in ci (nil: one copy).
func liveOf(ci *jetstream.ClusterInfo) int {
	if ci == nil {
		return 1
	}
	if ci.Leader == "" {
		return 0
	}
	n := 1
	for _, r := range ci.Replicas {
		if r != nil && r.Current && !r.Offline {
			n++
		}
	}
	return n
}

// standalone reports whether a stream or consumer lives on a NATS server
// that is not part of a cluster. nats-server 2.9 sends no cluster
// information then (ci is nil; checked against 2.9.10); later servers may
// send the leader alone, without a cluster name. A clustered server always
// names its cluster.
func standalone(ci *jetstream.ClusterInfo) bool {
	return ci == nil || (ci.Name == "" && ci.RaftGroup == "" && len(ci.Replicas) == 0)
}

// EnsureConsumer creates or updates the shared durable pull consumer.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Consumer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{
		Durable:       cfg.Consumer,
		Description:   "marketdata ingest workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1, // the worker rejects exhausted messages itself, so none is dropped unseen
		FilterSubject: cfg.SubjectPrefix + ".>",
		MaxAckPending: 50_000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: create consumer %s on %s: %w", cfg.Consumer, cfg.Stream, err)
	}
	return cons, nil
}

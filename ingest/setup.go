package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Config names the streams and subjects and sizes the work. The zero value of
// a field takes the default of contract §4 (see Defaults).
type Config struct {
	// Stream is the JetStream stream of matcher updates ("MARKETDATA").
	Stream string
	// SubjectPrefix is the prefix of update subjects ("md.v1").
	SubjectPrefix string
	// DLQStream keeps rejected messages ("MARKETDATA_DLQ").
	DLQStream string
	// DLQPrefix is the prefix of reject subjects ("md.dlq.v1").
	DLQPrefix string
	// NoticeSubject receives a change notice after each batch ("md.changes.v1").
	NoticeSubject string
	// Consumer is the durable pull consumer all workers share ("ingest").
	Consumer string
	// Replicas of the streams (1; 3 on a NATS cluster).
	Replicas int
	// MaxAge of stream messages (7 days).
	MaxAge time.Duration
	// BatchSize caps messages per batch (1000).
	BatchSize int
	// Linger is how long a batch may wait for more messages after its first
	// one (10ms).
	Linger time.Duration
	// Appliers is how many batches one process writes at once (4).
	Appliers int
	// AckWait is how long a delivered message may stay unacknowledged (30s).
	AckWait time.Duration
	// MaxDeliveries: a message delivered more often is rejected with reason
	// max_deliveries instead of being tried again (10).
	MaxDeliveries int
	// SweepEvery is how often resolved markets aging out of retention are
	// refreshed (1m).
	SweepEvery time.Duration
}

// Defaults fills zero fields with the contract's names and the default sizes.
func (c Config) Defaults() Config {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Stream, "MARKETDATA")
	def(&c.SubjectPrefix, "md.v1")
	def(&c.DLQStream, "MARKETDATA_DLQ")
	def(&c.DLQPrefix, "md.dlq.v1")
	def(&c.NoticeSubject, "md.changes.v1")
	def(&c.Consumer, "ingest")
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MaxAge == 0 {
		c.MaxAge = 7 * 24 * time.Hour
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.Linger == 0 {
		c.Linger = 10 * time.Millisecond
	}
	if c.Appliers == 0 {
		c.Appliers = 4
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = 10
	}
	if c.SweepEvery == 0 {
		c.SweepEvery = time.Minute
	}
	return c
}

// EnsureStreams creates the update and reject streams when absent. An
// existing stream is left as the operator configured it.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	streams := []jetstream.StreamConfig{{
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
	for _, sc := range streams {
		_, err := js.CreateStream(ctx, sc)
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("ingest: create stream %s: %w", sc.Name, err)
		}
	}
	return nil
}

// EnsureConsumer creates or updates the shared durable pull consumer.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Consumer, error) {
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

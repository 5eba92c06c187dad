package ingest

import (
	"fmt"
	"time"

	"github.com/marketdata/marketdata/internal/notice"
)

// Default names of contract §4 and of ingest's own streams. They are the one
// home of these names: `marketdata ingest`'s and `feed`'s flags default to
// them (through DefaultConfig), and tests build their own names from them.
const (
	// DefaultStream is the JetStream stream of matcher updates.
	DefaultStream = "MARKETDATA"
	// DefaultSubjectPrefix prefixes update subjects: <prefix>.<kind>.<id>.
	DefaultSubjectPrefix = "md.v1"
	// DefaultDLQStream keeps rejected messages.
	DefaultDLQStream = "MARKETDATA_DLQ"
	// DefaultDLQPrefix prefixes reject subjects: <prefix>.<kind>.
	DefaultDLQPrefix = "md.dlq.v1"
	// DefaultConsumer is the durable pull consumer all workers share.
	DefaultConsumer = "ingest"
)

// DefaultAckWait brings a SIGKILLed worker's messages back to the other
// workers within 5 s (JetStream's 30 s default left them there half a
// minute). Shorter would cost little on the wire (a worker's progress acks
// go out every quarter of it, and only for messages held that long), but
// the ack wait is also all the time a message may sit delivered in the
// client's buffer before the collector takes it and the keeper can speak
// for it, and all the lateness a starved process may have before its
// first progress ack: 5 s leaves about 3 s for both.
const DefaultAckWait = 5 * time.Second

// Config names the streams and subjects and sizes the work. Every field must
// be set: New refuses a value it cannot use, naming the field. Start from
// DefaultConfig.
type Config struct {
	// Stream is the JetStream stream of matcher updates.
	Stream string
	// SubjectPrefix is the prefix of update subjects.
	SubjectPrefix string
	// DLQStream keeps rejected messages.
	DLQStream string
	// DLQPrefix is the prefix of reject subjects.
	DLQPrefix string
	// NoticeSubject receives a change notice after each batch.
	NoticeSubject string
	// Consumer is the durable pull consumer all workers share.
	Consumer string
	// Replicas of the streams (3 on a NATS cluster).
	Replicas int
	// MaxAge of stream messages.
	MaxAge time.Duration
	// BatchSize caps messages per batch.
	BatchSize int
	// Linger is how long a batch may wait for more messages after its first
	// one. It must be positive: the client cannot hand over what it has
	// buffered without waiting, so a batch that waited no time at all would
	// always hold one message.
	Linger time.Duration
	// Appliers is how many batches one process writes at once. Batches in
	// flight at once never share a market (see collect), so two appliers
	// never write one price document at once.
	Appliers int
	// AckWait is how long JetStream waits for word of a delivered message
	// before it redelivers it: how long a dead worker's messages stay
	// behind. A live worker never lets it run out on a message it holds
	// (see keeper), so it bounds no batch.
	AckWait time.Duration
	// MaxDeliveries: a message delivered this often is rejected with reason
	// max_deliveries instead of being tried again.
	MaxDeliveries int
	// SweepEvery is how often resolved markets aging out of retention are
	// refreshed.
	SweepEvery time.Duration
	// FoldEvery is how often the candle queues are folded into the 1m store
	// and the coarse tables (store.FoldCandles): what a fold takes is what
	// queued since the last one, and what waits is read from the queue.
	FoldEvery time.Duration
}

// DefaultConfig is the production configuration: the contract's names and
// the default sizes. It is the one home of these values; the flags of
// `marketdata ingest` and `feed` take their defaults from it.
func DefaultConfig() Config {
	return Config{
		Stream:        DefaultStream,
		SubjectPrefix: DefaultSubjectPrefix,
		DLQStream:     DefaultDLQStream,
		DLQPrefix:     DefaultDLQPrefix,
		NoticeSubject: notice.ChangeSubject,
		Consumer:      DefaultConsumer,
		Replicas:      1,
		MaxAge:        7 * 24 * time.Hour,
		BatchSize:     1000,
		Linger:        10 * time.Millisecond,
		Appliers:      4,
		AckWait:       DefaultAckWait,
		MaxDeliveries: 10,
		SweepEvery:    time.Minute,
		FoldEvery:     time.Second,
	}
}

// check refuses a configuration the worker cannot run with, naming the
// field. The ranges operators may choose within are cmd/marketdata's to
// check, with the flags' names; this only keeps a zero value from being
// taken for a default.
func (c Config) check() error {
	for _, f := range []struct{ name, v string }{
		{"Stream", c.Stream}, {"SubjectPrefix", c.SubjectPrefix}, {"DLQStream", c.DLQStream},
		{"DLQPrefix", c.DLQPrefix}, {"NoticeSubject", c.NoticeSubject}, {"Consumer", c.Consumer},
	} {
		if f.v == "" {
			return fmt.Errorf("ingest: Config.%s is empty", f.name)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Replicas", c.Replicas}, {"BatchSize", c.BatchSize}, {"Appliers", c.Appliers}, {"MaxDeliveries", c.MaxDeliveries}} {
		if f.v < 1 {
			return fmt.Errorf("ingest: Config.%s is %d, want at least 1", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"MaxAge", c.MaxAge}, {"Linger", c.Linger}, {"AckWait", c.AckWait}, {"SweepEvery", c.SweepEvery}, {"FoldEvery", c.FoldEvery}} {
		if f.v <= 0 {
			return fmt.Errorf("ingest: Config.%s is %s, want a positive duration", f.name, f.v)
		}
	}
	return nil
}

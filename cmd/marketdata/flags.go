package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/notice"
)

// The flags of the NATS names and of ingest's sizes, and their checks. The
// defaults are ingest.DefaultConfig's and notice.ChangeSubject: the flags
// only let an operator override them. Every refusal names the flag.

// ingestFlags registers the flags of `marketdata ingest` on ic, which they
// fill with ingest.DefaultConfig first. --replicas defaults to
// MD_STREAM_REPLICAS (see applyReplicas).
func ingestFlags(fs *pflag.FlagSet, ic *ingest.Config) {
	*ic = ingest.DefaultConfig()
	streamFlags(fs, ic)
	fs.StringVar(&ic.DLQStream, "dlq-stream", ic.DLQStream, "stream that keeps rejected messages")
	fs.StringVar(&ic.DLQPrefix, "dlq-prefix", ic.DLQPrefix, "subject prefix of rejected messages")
	noticeFlag(fs, &ic.NoticeSubject, "subject of change notices")
	fs.StringVar(&ic.Consumer, "consumer", ic.Consumer, "durable consumer shared by all ingest workers")
	fs.IntVar(&ic.BatchSize, "batch-size", ic.BatchSize, "most messages per batch (1..10000)")
	fs.DurationVar(&ic.Linger, "linger", ic.Linger, "how long a batch may wait for more messages after its first (above 0, at most 1s)")
	fs.IntVar(&ic.Appliers, "appliers", ic.Appliers, "batches one process writes at once (1..64)")
	fs.DurationVar(&ic.AckWait, "ack-wait", ic.AckWait, "how long a dead worker's messages wait before JetStream redelivers them; live workers send progress acks for what they hold (at least 1s)")
}

// streamFlags registers the flags `ingest` and `feed` share on ic: the
// update stream, its subjects and --replicas. ic holds the defaults.
func streamFlags(fs *pflag.FlagSet, ic *ingest.Config) {
	fs.StringVar(&ic.Stream, "stream", ic.Stream, "JetStream stream of matcher updates (created if absent)")
	fs.StringVar(&ic.SubjectPrefix, "subject-prefix", ic.SubjectPrefix, "subject prefix of matcher updates")
	replicasFlag(fs, ic)
}

// noticeFlag registers --notice-subject of `ingest`, `api` and `cache
// rebuild`, which must agree: notice.ChangeSubject unless told otherwise.
func noticeFlag(fs *pflag.FlagSet, subject *string, usage string) {
	*subject = notice.ChangeSubject
	fs.StringVar(subject, "notice-subject", *subject, usage)
}

// replicasFlag registers --replicas of `ingest` and `feed`.
func replicasFlag(fs *pflag.FlagSet, ic *ingest.Config) {
	fs.IntVar(&ic.Replicas, "replicas", 0, "replicas of the streams this command creates, or raises on a NATS cluster when fewer (1..5); overrides MD_STREAM_REPLICAS (default: MD_STREAM_REPLICAS, itself 1 when unset; 3 on a NATS cluster)")
}

// applyReplicas takes MD_STREAM_REPLICAS unless --replicas was given: flags
// override the environment.
func applyReplicas(fs *pflag.FlagSet, cfg *Config, ic *ingest.Config) {
	if !fs.Changed("replicas") {
		ic.Replicas = cfg.StreamReplicas
	}
}

// validateReplicas checks --replicas (MD_STREAM_REPLICAS is checked by
// LoadConfig).
func validateReplicas(ic *ingest.Config) error {
	if ic.Replicas < 1 || ic.Replicas > 5 {
		return fmt.Errorf("--replicas: %d is not within 1..5 (JetStream's limit)", ic.Replicas)
	}
	return nil
}

// validateIngest checks the flags of `marketdata ingest`.
func validateIngest(ic *ingest.Config) error {
	if ic.BatchSize < 1 || ic.BatchSize > 10000 {
		return fmt.Errorf("--batch-size: %d is not within 1..10000", ic.BatchSize)
	}
	// 0 is refused rather than taken to mean "no wait": the JetStream
	// client cannot hand over what it has buffered without waiting on a
	// timer, so every batch would hold one message.
	if ic.Linger <= 0 || ic.Linger > time.Second {
		return fmt.Errorf("--linger: %s is not above 0 and at most 1s (a batch waits this long for more messages after its first)", ic.Linger)
	}
	if ic.Appliers < 1 || ic.Appliers > 64 {
		return fmt.Errorf("--appliers: %d is not within 1..64", ic.Appliers)
	}
	if ic.AckWait < time.Second {
		return fmt.Errorf("--ack-wait: %s is below 1s", ic.AckWait)
	}
	if err := checkName("--consumer", ic.Consumer); err != nil {
		return err
	}
	if err := validateStreams(ic); err != nil {
		return err
	}
	return validateReplicas(ic)
}

// validateStreams checks the stream names and subjects ingest and feed use:
// each a valid NATS name, and no subject inside another's stream (the
// update stream would take the notices, or the rejects, as updates).
func validateStreams(ic *ingest.Config) error {
	for _, n := range []struct{ flag, v string }{{"--stream", ic.Stream}, {"--dlq-stream", ic.DLQStream}} {
		if err := checkName(n.flag, n.v); err != nil {
			return err
		}
	}
	if ic.Stream == ic.DLQStream {
		return fmt.Errorf("--dlq-stream: %q is also --stream", ic.DLQStream)
	}
	for _, s := range []struct{ flag, v string }{{"--subject-prefix", ic.SubjectPrefix}, {"--dlq-prefix", ic.DLQPrefix}, {"--notice-subject", ic.NoticeSubject}} {
		if err := checkSubject(s.flag, s.v); err != nil {
			return err
		}
	}
	if within(ic.DLQPrefix, ic.SubjectPrefix) || within(ic.SubjectPrefix, ic.DLQPrefix) {
		return fmt.Errorf("--dlq-prefix: %q and --subject-prefix %q overlap: each stream needs subjects of its own", ic.DLQPrefix, ic.SubjectPrefix)
	}
	for _, p := range []struct{ flag, v string }{{"--subject-prefix", ic.SubjectPrefix}, {"--dlq-prefix", ic.DLQPrefix}} {
		if within(ic.NoticeSubject, p.v) {
			return fmt.Errorf("--notice-subject: %q is inside %s %q: its stream would keep the notices", ic.NoticeSubject, p.flag, p.v)
		}
	}
	return nil
}

// within reports whether subject is prefix or one of its subjects.
func within(subject, prefix string) bool {
	return subject == prefix || strings.HasPrefix(subject, prefix+".")
}

// checkName checks a JetStream stream or consumer name: not empty, and
// none of what NATS refuses in one (whitespace, '.', '*', '>', slashes,
// control characters).
func checkName(flag, v string) error {
	if v == "" {
		return fmt.Errorf("%s: empty", flag)
	}
	if i := strings.IndexFunc(v, func(r rune) bool {
		return r <= ' ' || r == 0x7f || strings.ContainsRune(".*>/\\", r)
	}); i >= 0 {
		return fmt.Errorf("%s: %q holds %q, which a NATS stream or consumer name cannot", flag, v, v[i:i+1])
	}
	return nil
}

// checkSubject checks a subject (or a subject prefix) to publish on:
// dot-separated tokens, none empty, no whitespace and no wildcard.
func checkSubject(flag, v string) error {
	for tok := range strings.SplitSeq(v, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("%s: %q is not a NATS subject (dot-separated tokens, no spaces, no wildcards)", flag, v)
		}
	}
	return nil
}

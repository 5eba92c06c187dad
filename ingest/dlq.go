package ingest

import (
	"context"
	"fmt"
	"net/textproto"
	"strconv"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/marketdata/marketdata/store"
)

// Headers of a reject on md.dlq.v1.<kind>.
const (
	// RejectReasonHeader carries the reject's reason.
	RejectReasonHeader = "Md-Reject-Reason"
	// RejectTruncatedHeader is set when the payload was cut short to fit the
	// NATS max payload together with the headers; its value is the original
	// payload's size in bytes. The whole payload is in ingest_rejects.
	RejectTruncatedHeader = "Md-Reject-Truncated"
	// RejectSubjectHeader names the subject the message was published on.
	RejectSubjectHeader = "Md-Subject"
	// RejectStreamSeqHeader is the message's sequence in the update stream.
	RejectStreamSeqHeader = "Md-Stream-Seq"
)

// maxReasonHeader bounds the reason in a DLQ header, so the headers always
// leave room: a reason is a short code and detail, never near this.
const maxReasonHeader = 4096

func (w *Worker) publishReject(ctx context.Context, r store.Reject) {
	msg := rejectMsg(w.cfg, r, w.nc.MaxPayload())
	if _, err := w.js.PublishMsg(ctx, msg); err != nil {
		w.log.Warn("ingest reject not published to the DLQ stream; it is in ingest_rejects", "subject", r.Subject, "err", err)
	}
	attrs := []any{"subject", r.Subject, "stream_seq", r.StreamSeq, "reason", r.Reason}
	if msg.Header.Get(RejectTruncatedHeader) != "" {
		attrs = append(attrs, "payload_bytes", len(r.Payload), "dlq_payload_bytes", len(msg.Data))
	}
	w.log.Warn("ingest message rejected", attrs...)
}

// rejectMsg is the DLQ message of r. NATS counts headers and data together
// against maxPayload (the server's max_payload, 1 MB by default): a payload
// that does not fit beside the headers is cut to the room left and marked
// with RejectTruncatedHeader, so that the reject and its reason always reach
// the DLQ.
func rejectMsg(cfg Config, r store.Reject, maxPayload int64) *nats.Msg {
	msg := nats.NewMsg(cfg.DLQPrefix + "." + r.Kind)
	// Stored once even when a redelivered reject is published again.
	msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("reject.%s.%d", cfg.Stream, r.StreamSeq))
	msg.Header.Set(RejectReasonHeader, cutText(r.Reason, maxReasonHeader))
	msg.Header.Set(RejectSubjectHeader, r.Subject)
	msg.Header.Set(RejectStreamSeqHeader, strconv.FormatUint(r.StreamSeq, 10))
	msg.Data = r.Payload
	if int64(headerSize(msg.Header)+len(r.Payload)) <= maxPayload {
		return msg
	}
	msg.Header.Set(RejectTruncatedHeader, strconv.Itoa(len(r.Payload)))
	room := max(maxPayload-int64(headerSize(msg.Header)), 0)
	msg.Data = r.Payload[:min(room, int64(len(r.Payload)))]
	return msg
}

// headerSize is the size of h on the wire, as nats.go counts it against the
// max payload: "NATS/1.0\r\n", each "Key: value\r\n" (value trimmed), "\r\n".
func headerSize(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(textproto.TrimString(v)) + len("\r\n")
		}
	}
	return n
}

// cutText shortens s to at most n bytes at a character boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

package ingest

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// TestHeaderSizeIsNATS checks headerSize against nats.go itself: a message
// of exactly the max payload, headers counted as headerSize counts them, is
// sent; one byte more is refused with ErrMaxPayload.
func TestHeaderSizeIsNATS(t *testing.T) {
	nc, names := testenv.NATS(t)
	msg := rejectMsg(Config{DLQPrefix: names.DLQPrefix, Stream: names.Stream},
		store.Reject{Kind: KindTrade, Subject: "x.y", Reason: "bad_json: \t padded \r\n", StreamSeq: 7}, nc.MaxPayload())
	room := int(nc.MaxPayload()) - headerSize(msg.Header)
	msg.Data = make([]byte, room)
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatalf("publish of headers + data = max payload: got %v, want nil", err)
	}
	msg.Data = make([]byte, room+1)
	if err := nc.PublishMsg(msg); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("publish one byte over: got %v, want %v", err, nats.ErrMaxPayload)
	}
}

// TestRejectMsgFits: whatever the payload's size, headers plus data fit the
// max payload; a payload cut short is a prefix of the original, marked with
// its original size, and the reason is kept.
func TestRejectMsgFits(t *testing.T) {
	const maxPayload = 1 << 20
	cfg := DefaultConfig()
	reason := "bad_json: invalid character 'x' looking for beginning of value"
	base := rejectMsg(cfg, store.Reject{Kind: KindEvent, Subject: DefaultSubjectPrefix + ".event.e", Reason: reason, StreamSeq: 123}, maxPayload)
	room := maxPayload - headerSize(base.Header) // the room without the truncation mark
	for _, size := range []int{0, 100, room - 1, room, room + 1, 1_000_000, maxPayload, maxPayload + 10} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			payload := bytes.Repeat([]byte("x"), size)
			msg := rejectMsg(cfg, store.Reject{Kind: KindEvent, Subject: DefaultSubjectPrefix + ".event.e", Reason: reason, Payload: payload, StreamSeq: 123}, maxPayload)
			if got := headerSize(msg.Header) + len(msg.Data); got > maxPayload {
				t.Errorf("headers + data: got %d bytes, want at most %d", got, maxPayload)
			}
			if got := msg.Header.Get(RejectReasonHeader); got != reason {
				t.Errorf("reason: got %q, want %q", got, reason)
			}
			if !bytes.HasPrefix(payload, msg.Data) {
				t.Error("data: not a prefix of the payload")
			}
			cut := msg.Header.Get(RejectTruncatedHeader)
			switch {
			case size <= room && (cut != "" || len(msg.Data) != size):
				t.Errorf("payload that fits: got %d bytes, truncated %q; want all %d, unmarked", len(msg.Data), cut, size)
			case size > room && cut != strconv.Itoa(size):
				t.Errorf("%s: got %q, want the original size %d", RejectTruncatedHeader, cut, size)
			case size > room && headerSize(msg.Header)+len(msg.Data) != maxPayload:
				t.Errorf("cut payload: got %d bytes with headers, want exactly the max payload %d", headerSize(msg.Header)+len(msg.Data), maxPayload)
			}
		})
	}
	long := strings.Repeat("é", 3000)
	msg := rejectMsg(cfg, store.Reject{Kind: KindEvent, Reason: long}, maxPayload)
	if got := msg.Header.Get(RejectReasonHeader); len(got) > maxReasonHeader || !strings.HasPrefix(long, got) {
		t.Errorf("long reason: got %d bytes, want a prefix of at most %d at a character boundary", len(got), maxReasonHeader)
	}
}

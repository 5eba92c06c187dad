package ingest

import (
	"bytes"
	stdjson "encoding/json"
	"errors"

	json "github.com/segmentio/encoding/json"
)

// A field is one row of a message kind's table: the body field's name,
// whether the message must carry it, its value, the check that validates the
// value and where the checked value goes. Each kind lists its rows next to
// its message type (message.go); decode runs them.
type field struct {
	name string
	need need
	// set reports that the body carries the field: present and not null.
	set bool
	// status and when, for a field that belongs to one status: the message's
	// status and the status that requires the field.
	status *string
	when   string
	// value, check and dst are the row's typed parts, held as any so that
	// one table holds fields of every type; typed puts the types back to run
	// the check.
	value, check, dst any
	typed             runner
}

// need says when a field must be in the body.
type need int

const (
	optional   need = iota // checked when present
	required               // missing or null is refused
	withStatus             // required when the status is the field's, ignored otherwise
)

// A check validates a value v the body carries, named name in its reason, and
// stores it in dst, converted to the entity's type.
type check[T, D any] func(name string, v *T, dst *D) error

// runner runs a field's check. Its implementation, typedRun, is an empty
// struct, which a row holds without an allocation: a generic function value
// would cost one a row and message, and decoding is ingest's hot path.
type runner interface {
	run(f *field) error
}

type typedRun[T, D any] struct{}

func (typedRun[T, D]) run(f *field) error {
	return f.check.(check[T, D])(f.name, f.value.(*T), f.dst.(*D))
}

func row[T, D any](name string, n need, v *T, c check[T, D], dst *D) field {
	return field{name: name, need: n, set: v != nil, value: v, check: c, dst: dst, typed: typedRun[T, D]{}}
}

// must is a field the message must carry.
func must[T, D any](name string, v *T, c check[T, D], dst *D) field {
	return row(name, required, v, c, dst)
}

// mustMap is a map field the message must carry: a JSON null or a missing
// field leaves the map nil.
func mustMap[K comparable, V, D any](name string, v *map[K]V, c check[map[K]V, D], dst *D) field {
	f := row(name, required, v, c, dst)
	f.set = *v != nil
	return f
}

// mayMap is a map field the message may leave out (or send as null).
func mayMap[M ~map[K]V, K comparable, V, D any](name string, v *M, c check[M, D], dst *D) field {
	f := row(name, optional, v, c, dst)
	f.set = *v != nil
	return f
}

// may is a field the message may leave out (or send as null).
func may[T, D any](name string, v *T, c check[T, D], dst *D) field {
	return row(name, optional, v, c, dst)
}

// when is a field that status requires when it is want, and that is ignored,
// neither checked nor kept, when it is any other.
func when[T, D any](status *string, want, name string, v *T, c check[T, D], dst *D) field {
	f := row(name, withStatus, v, c, dst)
	f.status, f.when = status, want
	return f
}

// kindTable lists a message's fields for the subject's id, each storing into e.
type kindTable[M, E any] func(m *M, subjectID string, e *E) []field

// decode builds an entity from a message body: the JSON is decoded into the
// kind's message type, then its table is run. First every required field is
// looked for, in table order; then each field present is checked in table
// order, and at the first field that belongs to a status, every field the
// message's status requires is looked for. A message with several faults is
// refused for the first found.
func decode[M, E any](data []byte, subjectID string, table kindTable[M, E]) (*E, error) {
	var m M
	if err := unmarshal(data, &m); err != nil {
		return nil, err
	}
	e := new(E)
	fields := table(&m, subjectID, e)
	for i := range fields {
		if f := &fields[i]; f.need == required && !f.set {
			return nil, invalid(ReasonMissingField, "%s", f.name)
		}
	}
	statusChecked := false
	for i := range fields {
		f := &fields[i]
		if f.need == withStatus {
			if !statusChecked {
				if err := statusFields(fields[i:]); err != nil {
					return nil, err
				}
				statusChecked = true
			}
			if *f.status != f.when {
				continue
			}
		}
		if !f.set {
			continue
		}
		if err := f.typed.run(f); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// statusFields looks for the fields the message's status requires. The
// status itself is a required field checked before them.
func statusFields(fields []field) error {
	for i := range fields {
		if f := &fields[i]; f.need == withStatus && *f.status == f.when && !f.set {
			return invalid(ReasonMissingField, "%s (required when status is %s)", f.name, f.when)
		}
	}
	return nil
}

func unmarshal(data []byte, v any) error {
	// Decoding null into a struct succeeds and sets nothing; it is no more an
	// object than an array or a string is.
	if bytes.Equal(bytes.Trim(data, " \t\r\n"), []byte("null")) {
		return invalid(ReasonBadJSON, "the body is a JSON null, not an object")
	}
	// json.Unmarshal checks the whole input first, so trailing data after
	// the object is a syntax error like any other. A message refused by the
	// fast decoder is decoded again by encoding/json, whose errors name the
	// JSON type and escape the bytes they quote: reasons stay what they
	// were, and never carry a NUL or invalid UTF-8 (which Postgres refuses
	// in ingest_rejects).
	if err := json.Unmarshal(data, v); err != nil {
		err = stdjson.Unmarshal(data, v)
		if err == nil {
			return invalid(ReasonBadJSON, "the body is not valid JSON")
		}
		var te *stdjson.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return invalid(ReasonBadJSON, "the body is a JSON %s, not an object", te.Value)
			}
			return invalid(ReasonInvalidField, "field %s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return invalid(ReasonBadJSON, "%v", err)
	}
	return nil
}

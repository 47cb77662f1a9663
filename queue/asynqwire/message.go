package asynqwire

import (
	"errors"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Message is the subset of asynq's TaskMessage chronos writes when
// it enqueues (all but Retried, ErrorMsg and Deadline) and reads (for
// archived tasks and the tasks a launcher takes).
type Message struct {
	Type      string
	Payload   []byte
	ID        string
	Queue     string
	Retry     int32
	Retried   int32  // attempts that failed so far, set by asynq (and a launcher)
	ErrorMsg  string // the last attempt's error, set by asynq (and a launcher)
	Timeout   int64  // seconds
	Deadline  int64  // unix s; chronos writes none, asynq honours one
	Retention int64  // seconds
}

// TaskMessage field numbers a launcher rewrites when it finishes a task
// (see withFields).
const (
	retriedField      protowire.Number = 6
	errorMsgField     protowire.Number = 7
	lastFailedAtField protowire.Number = 11
	completedAtField  protowire.Number = 13
)

// Encode marshals the message as asynq's protobuf TaskMessage: fields in
// field-number order, zero values omitted, as proto.Marshal does.
func (m *Message) Encode() []byte {
	b := make([]byte, 0, 64+len(m.Payload)+len(m.ID))
	str := func(num protowire.Number, v []byte) {
		if len(v) > 0 {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendBytes(b, v)
		}
	}
	varint := func(num protowire.Number, v int64) {
		if v != 0 {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(v))
		}
	}
	str(1, []byte(m.Type))
	str(2, m.Payload)
	str(3, []byte(m.ID))
	str(4, []byte(m.Queue))
	varint(5, int64(m.Retry))
	varint(8, m.Timeout)
	varint(12, m.Retention)
	return b
}

// DecodeMessage reads the fields of Message from an encoded
// TaskMessage, skipping the others.
func DecodeMessage(b []byte) (*Message, error) {
	var m Message
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errors.New("asynq task message: bad tag")
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, errors.New("asynq task message: bad field")
		}
		b = b[n:]
		switch num {
		case 1:
			m.Type = string(v)
		case 2:
			m.Payload = v
		case 3:
			m.ID = string(v)
		case 4:
			m.Queue = string(v)
		case 5:
			m.Retry = int32(x)
		case 6:
			m.Retried = int32(x)
		case 7:
			m.ErrorMsg = string(v)
		case 8:
			m.Timeout = int64(x)
		case 9:
			m.Deadline = int64(x)
		case 12:
			m.Retention = int64(x)
		}
	}
	return &m, nil
}

// field is a TaskMessage field to set: a varint or, when str is
// true, a string.
type field struct {
	num protowire.Number
	v   int64
	s   string
	str bool
}

// withFields returns the encoded TaskMessage b with the given fields
// set and every other field kept as it is, unknown ones included (asynq's
// headers, fields of later versions): what asynq's server writes when it
// marks a task completed, retried or archived. Zero values are left out,
// as proto.Marshal leaves them.
func withFields(b []byte, fields ...field) []byte {
	out := make([]byte, 0, len(b)+32)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break // not a message asynq could read either; keep what is set
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			break
		}
		if !slices.ContainsFunc(fields, func(f field) bool { return f.num == num }) {
			out = append(out, b[:n+m]...)
		}
		b = b[n+m:]
	}
	for _, f := range fields {
		switch {
		case f.str && f.s != "":
			out = protowire.AppendTag(out, f.num, protowire.BytesType)
			out = protowire.AppendString(out, f.s)
		case !f.str && f.v != 0:
			out = protowire.AppendTag(out, f.num, protowire.VarintType)
			out = protowire.AppendVarint(out, uint64(f.v))
		}
	}
	return out
}

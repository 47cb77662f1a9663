package queue

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// asynq's Redis layout and task encoding, written by chronos directly so
// that a page of runs reaches asynq in one script call instead of one call
// per task (asynq's Client has no batch enqueue), and read back the same
// way for archived tasks (asynq's Inspector reads one task per call). This
// mirrors asynq v0.26 (internal/base and internal/proto/asynq.proto);
// TestAsynqWireMatchesClient pins it byte for byte against asynq's own
// Client, and asynq's server and Inspector read what it writes.
func asynqTaskKeyPrefix(q string) string { return "asynq:{" + q + "}:t:" }
func asynqPendingKey(q string) string    { return "asynq:{" + q + "}:pending" }
func asynqActiveKey(q string) string     { return "asynq:{" + q + "}:active" }
func asynqScheduledKey(q string) string  { return "asynq:{" + q + "}:scheduled" }
func asynqRetryKey(q string) string      { return "asynq:{" + q + "}:retry" }
func asynqArchivedKey(q string) string   { return "asynq:{" + q + "}:archived" }
func asynqCompletedKey(q string) string  { return "asynq:{" + q + "}:completed" }

const asynqAllQueues = "asynq:queues"

// asynqMessage is the subset of asynq's TaskMessage chronos writes (all
// but ErrorMsg) and reads (Type, Payload, ErrorMsg).
type asynqMessage struct {
	Type      string
	Payload   []byte
	ID        string
	Queue     string
	Retry     int32
	ErrorMsg  string // the last attempt's error, set by asynq
	Timeout   int64  // seconds
	Retention int64  // seconds
}

// encode marshals the message as asynq's protobuf TaskMessage: fields in
// field-number order, zero values omitted, as proto.Marshal does.
func (m *asynqMessage) encode() []byte {
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

// decodeAsynqMessage reads the fields of asynqMessage from an encoded
// TaskMessage, skipping the others.
func decodeAsynqMessage(b []byte) (*asynqMessage, error) {
	var m asynqMessage
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
		case 7:
			m.ErrorMsg = string(v)
		case 8:
			m.Timeout = int64(x)
		case 12:
			m.Retention = int64(x)
		}
	}
	return &m, nil
}

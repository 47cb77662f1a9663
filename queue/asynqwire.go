package queue

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// asynq's Redis layout and task encoding, written by chronos directly so
// that a page of runs reaches asynq in one script call instead of one call
// per task (asynq's Client has no batch enqueue). This mirrors asynq v0.26
// (internal/base and internal/proto/asynq.proto); TestAsynqWireMatchesClient
// pins it byte for byte against asynq's own Client, and asynq's server and
// Inspector read what it writes.
func asynqTaskKeyPrefix(q string) string { return "asynq:{" + q + "}:t:" }
func asynqPendingKey(q string) string    { return "asynq:{" + q + "}:pending" }
func asynqScheduledKey(q string) string  { return "asynq:{" + q + "}:scheduled" }
func asynqArchivedKey(q string) string   { return "asynq:{" + q + "}:archived" }

const asynqAllQueues = "asynq:queues"

// asynqMessage is the subset of asynq's TaskMessage a new task sets.
type asynqMessage struct {
	Type      string
	Payload   []byte
	ID        string
	Queue     string
	Retry     int32
	Timeout   int64 // seconds
	Retention int64 // seconds
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

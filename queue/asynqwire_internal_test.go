package queue

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// The decoder reads back what the encoder writes, plus the error asynq
// records on a failed attempt, and skips fields it does not know.
func TestDecodeAsynqMessage(t *testing.T) {
	want := asynqMessage{Type: TaskTypeRun, Payload: []byte(`{"idempotency_key":"k"}`), ID: "k", Queue: "chronos",
		Retry: 7, Timeout: 90, Retention: 86400}
	b := want.encode()
	b = protowire.AppendTag(b, 6, protowire.VarintType) // retried
	b = protowire.AppendVarint(b, 3)
	b = protowire.AppendTag(b, 7, protowire.BytesType) // error_msg
	b = protowire.AppendString(b, "executor answered 503")
	b = protowire.AppendTag(b, 13, protowire.Fixed64Type) // a field chronos doesn't know
	b = protowire.AppendFixed64(b, 42)
	got, err := decodeAsynqMessage(b)
	require.NoError(t, err)
	want.ErrorMsg = "executor answered 503"
	require.Equal(t, want, *got)

	_, err = decodeAsynqMessage(b[:len(b)-3])
	require.Error(t, err, "a truncated message")
}

func FuzzDecodeAsynqMessage(f *testing.F) {
	f.Add((&asynqMessage{Type: TaskTypeRun, Payload: []byte(`{}`), ID: "k", Queue: "q", Retry: 1}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeAsynqMessage(b)
		if err == nil {
			require.NotNil(t, m)
		}
	})
}

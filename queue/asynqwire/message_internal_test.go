package asynqwire

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// The decoder reads back what the encoder writes, plus the error asynq
// records on a failed attempt, and skips fields it does not know.
func TestDecodeAsynqMessage(t *testing.T) {
	want := Message{Type: "chronos:run", Payload: []byte(`{"idempotency_key":"k"}`), ID: "k", Queue: "chronos",
		Retry: 7, Timeout: 90, Retention: 86400}
	b := want.Encode()
	b = protowire.AppendTag(b, 6, protowire.VarintType) // retried
	b = protowire.AppendVarint(b, 3)
	b = protowire.AppendTag(b, 7, protowire.BytesType) // error_msg
	b = protowire.AppendString(b, "executor answered 503")
	b = protowire.AppendTag(b, 13, protowire.Fixed64Type) // a field chronos doesn't know
	b = protowire.AppendFixed64(b, 42)
	got, err := DecodeMessage(b)
	require.NoError(t, err)
	want.Retried, want.ErrorMsg = 3, "executor answered 503"
	require.Equal(t, want, *got)

	_, err = DecodeMessage(b[:len(b)-3])
	require.Error(t, err, "a truncated message")
}

// A launcher finishing a task rewrites the fields asynq's server would
// and keeps every other one, those it does not know included (asynq's
// headers).
func TestWithAsynqFields(t *testing.T) {
	orig := Message{Type: "chronos:run", Payload: []byte(`{"idempotency_key":"k"}`), ID: "k", Queue: "chronos",
		Retry: 7, Retried: 1, ErrorMsg: "first", Timeout: 90, Retention: 86400}
	b := orig.Encode()
	b = protowire.AppendTag(b, 6, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 7, protowire.BytesType)
	b = protowire.AppendString(b, "first")
	header := protowire.AppendTag(nil, 15, protowire.BytesType) // headers: map entry {"a": "b"}
	header = protowire.AppendBytes(header, []byte{0x0a, 0x01, 'a', 0x12, 0x01, 'b'})
	b = append(b, header...)

	out := withFields(b, field{num: retriedField, v: 2},
		field{num: errorMsgField, s: "second", str: true}, field{num: lastFailedAtField, v: 1700000000})
	got, err := DecodeMessage(out)
	require.NoError(t, err)
	want := orig
	want.Retried, want.ErrorMsg = 2, "second"
	require.Equal(t, want, *got)
	require.Contains(t, string(out), string(header), "unknown fields are kept")
	require.Equal(t, 1, bytes.Count(out, []byte("second")))

	// A zero value clears the field, as proto.Marshal leaves it out.
	got, err = DecodeMessage(withFields(out, field{num: errorMsgField, str: true}))
	require.NoError(t, err)
	require.Empty(t, got.ErrorMsg)
}

func FuzzDecodeAsynqMessage(f *testing.F) {
	f.Add((&Message{Type: "chronos:run", Payload: []byte(`{}`), ID: "k", Queue: "q", Retry: 1}).Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err == nil {
			require.NotNil(t, m)
		}
		// Rewriting never panics, and what decoded still does, with the
		// fields set.
		out := withFields(b, field{num: retriedField, v: 9}, field{num: errorMsgField, s: "e", str: true})
		if err == nil {
			m2, err := DecodeMessage(out)
			require.NoError(t, err)
			require.Equal(t, int32(9), m2.Retried)
			require.Equal(t, "e", m2.ErrorMsg)
			require.Equal(t, m.Payload, m2.Payload)
		}
	})
}

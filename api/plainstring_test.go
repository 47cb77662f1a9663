package api_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
)

// TestStringFieldsDecodeAsJSONDoes: a string field reads as
// json.Unmarshal reads it, whether it takes the path for strings without
// escapes or not, and invalid UTF-8 is refused either way.
func TestStringFieldsDecodeAsJSONDoes(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`"sch_1"`, `""`, `"Europe/Berlin"`, `"*/5 * * * *"`, `"日本語 ✓"`, `"a\"b"`, `"a\\b"`, `"\u00e9t\u00e9"`,
		`"\ufffd"`, `"�"`, `"tab\there"`, `"line\nbreak"`, `"/slash\/"`,
	} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(raw), &want), raw)
		got, err := api.ObjectStr(map[string][]byte{"f": []byte(raw)}, "f")
		require.NoError(t, err, raw)
		require.Equal(t, want, got, raw)
	}
	for _, raw := range []string{"\"bad \xff byte\"", `"\ud800"`, `12`, `true`, `{"a":1}`, `["x"]`} {
		got, err := api.ObjectStr(map[string][]byte{"f": []byte(raw)}, "f")
		require.Error(t, err, "%s gave %q", raw, got)
	}
	got, err := api.ObjectStr(map[string][]byte{"f": []byte(`null`)}, "f")
	require.NoError(t, err)
	require.Empty(t, got, "null is absent")
	require.True(t, utf8.ValidString(got))
}

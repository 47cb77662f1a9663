package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// ObjectStr exposes object.str to the external tests.
func ObjectStr(body map[string][]byte, name string) (string, error) {
	o := object{}
	for k, v := range body {
		o[k] = v
	}
	return o.str(name)
}

// FlatObjectAgrees checks flatObject against json.Unmarshal on b and
// says whether flatObject split it.
func FlatObjectAgrees(t testing.TB, b []byte) bool {
	t.Helper()
	o, ok := flatObject(b)
	var want map[string]json.RawMessage
	err := json.Unmarshal(b, &want)
	if !ok {
		return false
	}
	require.NoError(t, err, "flatObject split %q, which json.Unmarshal refuses", b)
	require.Equal(t, len(want), len(o), "%q", b)
	for k, v := range want {
		require.Contains(t, o, k, "%q", b)
		require.Equal(t, string(v), string(o[k]), "%q: member %q", b, k)
	}
	return true
}

// UpsertResponseJSON exposes UpsertResponse.appendJSON to the external tests.
func UpsertResponseJSON(r *UpsertResponse) ([]byte, bool) { return r.appendJSON(nil) }

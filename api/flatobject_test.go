package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
)

// flatObjectBodies are bodies flatObject splits itself and bodies it must
// leave to json.Unmarshal.
var flatObjectBodies = []string{
	`{}`, ` { } `, `{"a":"b"}`, `{"schedule_id":"api-w0-1","workflow_id":"wf","version":"1","user_id":"bench","cron_expr":"*/5 * * * *","timezone":"Europe/Berlin"}`,
	"{\n\t\"a\" : 1 ,\r\n \"b\":-0.5e+3, \"c\":true,\"d\":false,\"e\":null}", `{"a":1,"a":2}`, `{"é":"ü"}`, `{"a":""}`,
	`{"a":0}`, `{"a":-0}`, `{"a":1E5}`, `{"a":1.25}`,
	// Left to json.Unmarshal: nested, escaped, or not JSON at all.
	`{"a":{"b":1}}`, `{"a":[1]}`, `{"a\"":1}`, `{"a":"\u00e9"}`, `{"a":"x\ny"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", "{\"\xff\":1}",
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`,
	`{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`, `{"a" 1}`, `{"a":1 "b":2}`, `{"a":1}}`, `{"a":1} x`, `{"a":1`, `{`, `{"a`, `[]`, `"a"`, ``,
	`{"a":'b'}`, `{a:1}`, `{"a":NaN}`, `{"a":Infinity}`,
}

// TestFlatObjectAgreesWithEncodingJSON holds flatObject to json.Unmarshal:
// what it splits, json.Unmarshal reads the same; what json.Unmarshal
// refuses, it never splits.
func TestFlatObjectAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	split := 0
	for _, body := range flatObjectBodies {
		if api.FlatObjectAgrees(t, []byte(body)) {
			split++
		}
	}
	require.Equal(t, 12, split, "bodies split without encoding/json")
}

func FuzzFlatObject(f *testing.F) {
	for _, b := range flatObjectBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		api.FlatObjectAgrees(t, b)
	})
}

package api_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
)

// TestUpsertResponseIsWhatEncodingJSONWrites holds the hand-written upsert
// answer to encoding/json's Encoder, which c.JSON uses: the same bytes.
func TestUpsertResponseIsWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
	ms := at.Add(123 * time.Millisecond)
	berlin := at.In(time.FixedZone("CEST", 2*3600))
	for _, r := range []api.UpsertResponse{
		{ScheduleID: "api-w0-1", NextRunAt: &at, Created: true, Changed: true, State: api.StateActive},
		{ScheduleID: "s", NextRunAt: &ms, State: api.StatePaused},
		{ScheduleID: "s", NextRunAt: &berlin, State: api.StateActive},
		{ScheduleID: "done", State: api.StateCompleted, Changed: true},
		{ScheduleID: "s<&>\"\\é\u2028\x7f", NextRunAt: &at, State: api.StateActive,
			Warnings: []string{"workflow wf version 1 is not registered: its runs will fail until it is (PUT /workflows/wf/versions/1)", "<b>&\n"}},
		{ScheduleID: "s", Warnings: []string{}},
	} {
		var want bytes.Buffer
		require.NoError(t, json.NewEncoder(&want).Encode(&r))
		got, ok := api.UpsertResponseJSON(&r)
		require.True(t, ok, "%+v", r)
		require.Equal(t, want.String(), string(got))
	}
	odd := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, ok := api.UpsertResponseJSON(&api.UpsertResponse{ScheduleID: "s", NextRunAt: &odd})
	require.False(t, ok, "a year past 9999 is left to encoding/json (which refuses it)")
}

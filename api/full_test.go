package api_test

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestFullRedis (issue 26 finding 1): on a full Redis (maxmemory reached,
// noeviction) writes answer 507 "Redis is full" and write nothing, reads
// go on, /readyz says so, and the log says "full"; freeing memory brings
// writes back.
func TestFullRedis(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	b := setup(t, setupOpts{log: &logs, redisArgs: []string{"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"}})
	ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", schedule("s1"))
	ok[api.WorkflowRef](t, b, http.StatusOK, http.MethodPut, "/workflows/wf/versions/1", `{"nodes":[]}`)
	filler := queuetest.Fill(t, b.rdb)

	changed := schedule("s1")
	changed["cron_expr"] = "*/5 * * * *"
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/schedules/upsert", changed},
		{http.MethodPost, "/schedules/upsert", schedule("s2")},
		{http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "s1", "paused": true}},
		{http.MethodDelete, "/schedules/s1", nil},
		{http.MethodPut, "/workflows/wf/versions/2", `{"nodes":[]}`},
	} {
		rec := b.do(t, r.method, r.path, r.body)
		requireError(t, rec, http.StatusInsufficientStorage, api.CodeRedisFull, "Redis is full")
		require.Equal(t, strconv.Itoa(api.RetryAfterSeconds), rec.Header().Get("Retry-After"))
	}
	got := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, "0 9 * * *", got.CronExpr, "nothing of the refused upsert was written")
	requireError(t, b.do(t, http.MethodGet, "/schedules/s2", nil), http.StatusNotFound, api.CodeNotFound, "")
	requireError(t, b.do(t, http.MethodGet, "/readyz", nil), http.StatusServiceUnavailable, api.CodeRedisFull, "Redis is full")
	require.Contains(t, logs.String(), "Redis is full")
	// Deleting a workflow version only frees memory: it works when full.
	rec := b.do(t, http.MethodDelete, "/workflows/wf/versions/1", nil)
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())

	require.NoError(t, b.rdb.Del(t.Context(), filler...).Err())
	ok[map[string]string](t, b, http.StatusOK, http.MethodGet, "/readyz", nil)
	ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", changed)
}

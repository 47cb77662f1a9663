package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
)

// The runs list shows by default the runs whose time has come, newest
// first; upcoming=true the runs queued ahead, soonest first; status=
// filters either. GET /schedules/:id shows the last run beside the next.
func TestRunsWhoseTimeHasComeAndUpcoming(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := schedule("s1")
	body["overlap_policy"] = "allow" // each run its own, none ended by the next
	upsert(t, b, body)
	var keys []string
	for range 3 {
		keys = append(keys, b.commitRun(t, "s1"))
	}
	ids := func(runs []*model.Run) []string {
		out := make([]string, len(runs))
		for i, r := range runs {
			out[i] = r.IdempotencyKey
		}
		return out
	}
	// Back to the second run's time: the third is queued ahead.
	second := time.Date(2026, 1, 2, 14, 0, 0, 0, time.UTC)
	b.clock.Set(second)
	runs := ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s1/runs", nil)
	require.Equal(t, []string{keys[1], keys[0]}, ids(runs.Runs), "due runs, newest first")
	runs = ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s1/runs?upcoming=true", nil)
	require.Equal(t, []string{keys[2]}, ids(runs.Runs), "queued ahead")

	ok[model.Run](t, b, http.StatusOK, http.MethodPost, "/runs/"+keys[0]+"/status", map[string]any{"status": "FAILED", "error": "disk full"})
	ok[model.Run](t, b, http.StatusOK, http.MethodPost, "/runs/"+keys[1]+"/status", map[string]any{"status": "SUCCESS"})
	runs = ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s1/runs?status=failed", nil)
	require.Equal(t, []string{keys[0]}, ids(runs.Runs))
	runs = ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s1/runs?status=ENQUEUED&upcoming=true", nil)
	require.Equal(t, []string{keys[2]}, ids(runs.Runs))
	runs = ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s1/runs?status=ENQUEUED", nil)
	require.Empty(t, runs.Runs)

	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, &api.LastRun{IdempotencyKey: keys[1], RunAt: second, Status: model.RunSuccess}, d.LastRun)
	require.Equal(t, []string{keys[1], keys[0]}, ids(d.RecentRuns))
	b.clock.Set(second.Add(25 * time.Hour))
	d = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1?runs=0", nil)
	require.Empty(t, d.RecentRuns)
	require.Equal(t, keys[2], d.LastRun.IdempotencyKey, "the last run is there without recent runs")

	e := requireError(t, b.do(t, http.MethodGet, "/schedules/s1/runs?status=DONE&upcoming=yes&limit=0", nil),
		http.StatusBadRequest, api.CodeInvalidArgument, "limit: ")
	require.Len(t, e.Details, 3, "%+v", e.Details)

	upsert(t, b, schedule("s2"))
	d = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s2", nil)
	require.Nil(t, d.LastRun, "no run yet")
}

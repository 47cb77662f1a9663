package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
)

// GET /schedules/:id/runs?reason= keeps the runs recorded with that
// reason; an unknown reason, or one that never goes with the status
// asked, is a 400 that lists the valid ones. The run views and /metrics
// show the reasons.
func TestRunsByReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := schedule("s")
	body["cron_expr"], body["timezone"], body["overlap_policy"] = "* * * * *", "UTC", "skip"
	upsert(t, b, body)
	first := b.commitRun(t, "s")  // ENQUEUED, in flight
	second := b.commitRun(t, "s") // SKIPPED: the first is in flight
	ok[model.Run](t, b, http.StatusOK, http.MethodPost, "/runs/"+first+"/status", map[string]any{"status": "FAILED", "error": "disk full"})

	keys := func(query string) []string {
		t.Helper()
		runs := ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s/runs"+query, nil)
		out := []string{}
		for _, r := range runs.Runs {
			out = append(out, r.IdempotencyKey)
		}
		return out
	}
	require.Equal(t, []string{second}, keys("?reason=overlap"))
	require.Equal(t, []string{second}, keys("?reason=overlap&status=skipped"))
	require.Equal(t, []string{first}, keys("?reason=executor_rejected"))
	require.Empty(t, keys("?reason=paused"))
	require.Empty(t, keys("?reason=dst_skipped"), "dst_skipped is a reason, none recorded here")
	require.Equal(t, []string{second, first}, keys(""))

	run := ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+second, nil)
	require.Equal(t, model.ReasonOverlap, run.Reason)
	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s", nil)
	require.Equal(t, model.ReasonOverlap, d.LastRun.Reason)

	e := requireError(t, b.do(t, http.MethodGet, "/schedules/s/runs?reason=bogus", nil), http.StatusBadRequest, api.CodeInvalidArgument, "reason: ")
	require.Contains(t, e.Message, `unknown reason "bogus"`)
	for _, r := range model.RunReasons() {
		require.Contains(t, e.Message, string(r), "the error lists every valid reason")
	}
	e = requireError(t, b.do(t, http.MethodGet, "/schedules/s/runs?reason=overlap&status=FAILED", nil), http.StatusBadRequest, api.CodeInvalidArgument, "reason: ")
	require.Contains(t, e.Message, "overlap is the reason of a SKIPPED run, never of a FAILED one")

	counts := map[string]float64{}
	mfs, err := b.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					counts[mf.GetName()+"/"+l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	require.Equal(t, 1.0, counts["chronos_runs_skipped_total/overlap"], "%v", counts)
	require.Equal(t, 1.0, counts["chronos_runs_failed_total/executor_rejected"], "%v", counts)
	require.Contains(t, counts, "chronos_runs_skipped_total/dst_skipped", "every reason is exported")
}

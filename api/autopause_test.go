package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// apBundle is an hourly "allow" schedule with pause_after_failures 3,
// created at t0, and a way to run its next hour and report its end.
type apBundle struct {
	*testBundle
	id string
}

func apSetup(t *testing.T, id string) *apBundle {
	t.Helper()
	b := setup(t)
	body := schedule(id)
	body["cron_expr"], body["timezone"], body["overlap_policy"], body["pause_after_failures"] = "0 * * * *", "UTC", "allow", 3
	upsert(t, b, body)
	return &apBundle{b, id}
}

// runHour lets the scheduler run the schedule's next hour and reports its
// end as an executor does.
func (b *apBundle) runHour(t *testing.T, status model.RunStatus) string {
	t.Helper()
	key := b.commitRun(t, b.id)
	ok[model.Run](t, b.testBundle, http.StatusOK, http.MethodPost, "/runs/"+key+"/status",
		map[string]any{"status": string(status), "error": "exit 1 at " + b.clock.Now().Format(time.Kitchen)})
	return key
}

func (b *apBundle) get(t *testing.T) detail {
	t.Helper()
	return ok[detail](t, b.testBundle, http.StatusOK, http.MethodGet, "/schedules/"+b.id, nil)
}

func TestAutoPauseAfterConsecutiveFailures(t *testing.T) {
	t.Parallel()
	b := apSetup(t, "ap")
	require.Equal(t, 3, b.get(t).PauseAfterFailures)
	b.runHour(t, model.RunFailed)
	b.runHour(t, model.RunFailed)
	d := b.get(t)
	require.Equal(t, 2, d.ConsecutiveFailures)
	require.Equal(t, "exit 1 at 2:00AM", d.LastError)
	b.runHour(t, model.RunSuccess) // resets the count
	require.Zero(t, b.get(t).ConsecutiveFailures)
	b.runHour(t, model.RunFailed)
	b.runHour(t, model.RunFailed)
	require.Equal(t, "active", b.get(t).State)
	b.runHour(t, model.RunFailed) // 06:00, the third in a row
	d = b.get(t)
	require.Equal(t, "paused", d.State)
	require.True(t, d.Paused)
	require.Equal(t, model.PausedFailures, d.PausedReason)
	require.Equal(t, "paused after 3 consecutive FAILED runs (pause_after_failures 3)", d.PausedNote)
	require.NotNil(t, d.PausedAt)
	require.Equal(t, t0.Add(6*time.Hour), d.PausedAt.UTC())
	require.Equal(t, 3, d.ConsecutiveFailures)
	require.Equal(t, "exit 1 at 6:00AM", d.LastError)

	// The metric counts it, read from Redis by the store's collector.
	require.Equal(t, 1.0, autoPausedTotal(t, b.store))

	// Paused: the scheduler plans nothing more.
	b.clock.Set(t0.Add(9 * time.Hour))
	b.tick(t, "ap")
	runs := ok[api.RunList](t, b.testBundle, http.StatusOK, http.MethodGet, "/schedules/ap/runs?limit=100", nil).Runs
	require.Len(t, runs, 6)
}

// Resuming with catchup skip continues at the next fire time after now;
// with catchup replay it first enqueues the hours missed while paused,
// as a backfill, once however often it is asked.
func TestResumeAfterAutoPause(t *testing.T) {
	t.Parallel()
	for _, catchup := range []string{"skip", "replay"} {
		t.Run(catchup, func(t *testing.T) {
			t.Parallel()
			b := apSetup(t, "r-"+catchup)
			for range 3 {
				b.runHour(t, model.RunFailed)
			}
			require.Equal(t, "paused", b.get(t).State) // at 03:00
			b.clock.Set(t0.Add(7*time.Hour + 30*time.Minute))
			resume := map[string]any{"schedule_id": b.id, "paused": false, "catchup": catchup}
			res := ok[api.PauseResponse](t, b.testBundle, http.StatusOK, http.MethodPost, "/schedules/pause", resume)
			require.Equal(t, "active", res.State)
			require.Zero(t, res.ConsecutiveFailures, "resuming clears the count")
			require.Empty(t, res.PausedReason)
			require.Nil(t, res.PausedAt)
			require.Equal(t, t0.Add(8*time.Hour), res.NextRunAt.UTC())
			runs := func() map[model.RunSource]int {
				out := map[model.RunSource]int{}
				for _, r := range ok[api.RunList](t, b.testBundle, http.StatusOK, http.MethodGet, "/schedules/"+b.id+"/runs?limit=100", nil).Runs {
					out[r.Source]++
				}
				return out
			}
			if catchup == "skip" {
				require.Nil(t, res.Replayed)
				require.Equal(t, map[model.RunSource]int{model.SourceSchedule: 3}, runs())
				return
			}
			// 04:00 .. 07:00 were missed while paused (paused at 03:00,
			// whose run had ended).
			require.NotNil(t, res.Replayed)
			require.Equal(t, 4, *res.Replayed)
			require.Equal(t, map[model.RunSource]int{model.SourceSchedule: 3, model.SourceBackfill: 4}, runs())
			again := ok[api.PauseResponse](t, b.testBundle, http.StatusOK, http.MethodPost, "/schedules/pause", resume)
			require.Zero(t, *again.Replayed)
			require.Equal(t, map[model.RunSource]int{model.SourceSchedule: 3, model.SourceBackfill: 4}, runs())
			require.Equal(t, 7, countTasks(t, b.testBundle))
		})
	}
}

func TestPauseNoteAndCatchupRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: &api.Config{BackfillMaxRuns: 2}})
	body := schedule("n")
	body["cron_expr"], body["timezone"] = "0 * * * *", "UTC"
	upsert(t, b, body)
	res := ok[api.PauseResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/pause",
		map[string]any{"schedule_id": "n", "paused": true, "note": "db migration until noon"})
	require.Equal(t, model.PausedManual, res.PausedReason)
	require.Equal(t, "db migration until noon", res.PausedNote)
	require.Equal(t, t0, res.PausedAt.UTC())
	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/n", nil)
	require.Equal(t, "db migration until noon", d.PausedNote)

	requireError(t, b.do(t, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "n", "paused": false, "catchup": "all"}),
		http.StatusBadRequest, api.CodeInvalidArgument, `catchup: must be skip or replay, got "all"`)
	requireError(t, b.do(t, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "n", "paused": true, "catchup": "replay"}),
		http.StatusBadRequest, api.CodeInvalidArgument, "catchup: applies to a resume")
	// Three hours paused plan more runs than BACKFILL_MAX_RUNS=2: refused,
	// still paused.
	b.clock.Set(t0.Add(3*time.Hour + time.Minute))
	requireError(t, b.do(t, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "n", "paused": false, "catchup": "replay"}),
		http.StatusBadRequest, api.CodeInvalidArgument, "catchup: the paused time, since 2026-01-01T00:00:00Z, plans more than 2 runs")
	require.Equal(t, "paused", ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/n", nil).State)
	requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", func() map[string]any {
		m := schedule("n")
		m["pause_after_failures"] = -1
		return m
	}()), http.StatusBadRequest, api.CodeInvalidArgument, "pause_after_failures: must be between 0 (never) and 1000")
}

func autoPausedTotal(t *testing.T, store *queue.Store) float64 {
	t.Helper()
	return testutil.ToFloat64(store.AutoPausedCollector())
}

func countTasks(t *testing.T, b *testBundle) int {
	t.Helper()
	return queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault)
}

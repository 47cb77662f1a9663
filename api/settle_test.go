package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// A paused schedule shows no run queued ahead as ENQUEUED: the pause
// removed them in the same step, and resuming plans them again. A deleted
// schedule's runs are SKIPPED (due) or gone (ahead) at once.
func TestPauseAndDeleteSettleTheRunsQueuedAhead(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{queue: &queue.Config{Lookahead: time.Minute}})
	body := schedule("p")
	body["cron_expr"], body["timezone"], body["overlap_policy"] = "* * * * *", "UTC", "allow"
	upsert(t, b, body)
	minute := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	b.clock.Set(minute(0).Add(5 * time.Second))
	b.tick(t, "p")
	b.clock.Set(minute(1).Add(5 * time.Second)) // 00:01 due, 00:02 ahead
	b.tick(t, "p")
	upcoming := func() []*model.Run {
		return ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/p/runs?upcoming=true", nil).Runs
	}
	require.Len(t, upcoming(), 1)
	ahead := upcoming()[0].IdempotencyKey
	due := model.IdempotencyKey("p", minute(1))

	ok[api.ScheduleView](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "p", "paused": true})
	require.Empty(t, upcoming(), "nothing queued ahead of a paused schedule")
	requireError(t, b.do(t, http.MethodGet, "/runs/"+ahead, nil), http.StatusNotFound, api.CodeNotFound, "")
	r := ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+due, nil)
	require.Equal(t, model.RunSkipped, r.Status)
	require.Equal(t, "schedule paused before the run started", r.Error)

	ok[api.ScheduleView](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "p", "paused": false})
	b.tick(t, "p")
	runs := upcoming()
	require.Len(t, runs, 1, "resumed, it plans 00:02 again")
	require.Equal(t, ahead, runs[0].IdempotencyKey)
	require.Equal(t, model.RunEnqueued, runs[0].Status)

	b.clock.Set(minute(2).Add(5 * time.Second)) // 00:02 due, 00:03 ahead
	b.tick(t, "p")
	next := upcoming()[0].IdempotencyKey
	require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/schedules/p", nil).Code)
	r = ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+ahead, nil)
	require.Equal(t, model.RunSkipped, r.Status, "00:02 was due")
	require.Equal(t, "schedule deleted before the run started", r.Error)
	requireError(t, b.do(t, http.MethodGet, "/runs/"+next, nil), http.StatusNotFound, api.CodeNotFound, "")
}

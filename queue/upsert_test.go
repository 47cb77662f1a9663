package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestUpsertThatLeavesAFieldOutDeletesIt checks the fields a body leaves
// out, which upsert.lua gets as one argument of names and splits only for
// a stored schedule: a field the stored one had and the new body omits is
// deleted (a change), and the same shorter body again changes nothing.
func TestUpsertThatLeavesAFieldOutDeletesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := queuetest.StartRedis(t)
	rdb := r.Universal(t) // with the key guard: every key the script touches is in KEYS
	store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)), &queue.Config{})
	require.NoError(t, err)
	full := model.ScheduleRecord{ID: "s", Kind: model.KindCron, CronExpr: "0 * * * *", Timezone: "UTC",
		WorkflowID: "wf", Version: "1", UserID: "u", JitterMs: 5000, PauseAfterFailures: 3,
		OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone}
	require.NoError(t, full.Validate())
	res, err := store.UpsertSchedule(ctx, &full)
	require.NoError(t, err)
	require.True(t, res.Created)

	short := full
	short.JitterMs, short.PauseAfterFailures = 0, 0
	res, err = store.UpsertSchedule(ctx, &short)
	require.NoError(t, err)
	require.True(t, res.Changed && !res.Created, "leaving jitter_ms and pause_after_failures out is a change")
	got, err := store.GetSchedule(ctx, "s")
	require.NoError(t, err)
	require.Zero(t, got.JitterMs)
	require.Zero(t, got.PauseAfterFailures)
	require.Equal(t, got, res.Schedule, "the answer is the stored schedule")
	h, err := rdb.HGetAll(ctx, queue.ScheduleKey(queue.ShardOf("s", queue.ShardsDefault), "s")).Result()
	require.NoError(t, err)
	for _, f := range []string{"j", "pf"} { // the jitter and pause_after_failures fields
		require.NotContains(t, h, f)
	}

	res, err = store.UpsertSchedule(ctx, &short)
	require.NoError(t, err)
	require.False(t, res.Changed || res.Created, "the same shorter body again changes nothing")
	require.Equal(t, got, res.Schedule)
}

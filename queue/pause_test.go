package queue_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Resuming computes the next fire time from the definition it read; an
// upsert landing between that read and the resume script must not leave
// the new definition with the old one's next time (here a yearly
// schedule made hourly would not run until January).
func TestResumeRacingAnUpsertUsesTheNewDefinition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := queuetest.StartRedis(t)
	clock := queue.NewSimClock(time.Date(2024, 3, 9, 0, 0, 0, 0, time.UTC))
	hooked, hook := r.Universal(t), &queuetest.BeforeScriptHook{}
	hooked.AddHook(hook)
	store, err := queue.NewStore(ctx, hooked, clock, nil)
	require.NoError(t, err)
	other, err := queue.NewStore(ctx, r.Universal(t), clock, nil)
	require.NoError(t, err)
	rec := func(expr string) *model.ScheduleRecord {
		rec := &model.ScheduleRecord{ID: "y", CronExpr: expr, Timezone: "UTC", Target: model.TargetWorkflow,
			WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
		require.NoError(t, rec.Validate())
		return rec
	}
	_, err = store.UpsertSchedule(ctx, rec("0 0 1 1 *"))
	require.NoError(t, err)
	_, err = store.SetPaused(ctx, "y", true)
	require.NoError(t, err)

	hook.Fn = func() { // the deploy pipeline makes it hourly meanwhile
		_, err := other.UpsertSchedule(ctx, rec("0 * * * *"))
		require.NoError(t, err)
	}
	got, err := store.SetPaused(ctx, "y", false)
	require.NoError(t, err)
	require.False(t, got.Paused)
	require.Equal(t, "0 * * * *", got.CronExpr)
	keys := queuetest.Keys(t, hooked, "chronos:*:sched:y")
	require.Len(t, keys, 1)
	want := strconv.FormatInt(clock.Now().Add(time.Hour).UnixMilli(), 10)
	require.Equal(t, want, hooked.HGet(ctx, keys[0], "next").Val(), "stored next fire time")
}

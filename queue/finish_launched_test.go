package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// FinishLaunched records a launched run's status and finishes its task
// as done in one script call: the record says what the executor
// answered, asynq (and so asynqmon) sees the task completed and counted.
// A run that moved on meanwhile keeps its status (ErrConflict) and its
// task is finished all the same; a run whose record names a schedule the
// task did not is reported again with that schedule's keys, and its task
// finished once.
func TestFinishLaunchedRecordsTheStatusAndFinishesTheTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{Shards: 1, TaskRetention: time.Hour})
	require.NoError(t, err)
	for _, k := range []string{"started", "moved-on", "other-schedule"} {
		_, started, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: k})
		require.NoError(t, err)
		require.True(t, started)
	}
	tasks, err := store.Tasks().Take(ctx, 10)
	require.NoError(t, err)
	require.Len(t, tasks, 3)
	byID := map[string]*asynqwire.Task{}
	for _, tk := range tasks {
		byID[tk.ID] = tk
	}
	payload := func(id string) *queue.TaskPayload {
		p, err := queue.DecodeTaskPayload(byID[id].Payload)
		require.NoError(t, err)
		return p
	}
	sh := 0
	require.NoError(t, store.ReportTaskStatus(ctx, payload("moved-on"), queue.StatusUpdate{Status: model.RunSuccess}))
	require.NoError(t, rdb.HSet(ctx, queue.RunKey(sh, "other-schedule"), queue.RfSchedule, "s1").Err())

	finished, err := store.FinishLaunched(ctx, byID["started"], payload("started"), queue.StatusUpdate{Status: model.RunStarted, RunID: "exec-1"})
	require.NoError(t, err)
	require.True(t, finished)
	run, _, err := store.GetRun(ctx, "started")
	require.NoError(t, err)
	require.Equal(t, model.RunStarted, run.Status)
	require.Equal(t, "exec-1", run.RunID)

	finished, err = store.FinishLaunched(ctx, byID["moved-on"], payload("moved-on"), queue.StatusUpdate{Status: model.RunStarted})
	require.ErrorIs(t, err, queue.ErrConflict)
	require.True(t, finished, "the task ends however the status stood")
	run, _, err = store.GetRun(ctx, "moved-on")
	require.NoError(t, err)
	require.Equal(t, model.RunSuccess, run.Status)

	finished, err = store.FinishLaunched(ctx, byID["other-schedule"], payload("other-schedule"), queue.StatusUpdate{Status: model.RunSuccess})
	require.NoError(t, err)
	require.True(t, finished)
	require.Equal(t, string(model.RunSuccess), rdb.HGet(ctx, queue.RunKey(sh, "other-schedule"), queue.RfStatus).Val())

	q := queue.ShardQueue(queue.QueueNameDefault, 0)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for id := range byID {
		info, err := insp.GetTaskInfo(q, id)
		require.NoError(t, err)
		require.Equal(t, asynq.TaskStateCompleted, info.State, id)
	}
	qi, err := insp.GetQueueInfo(q)
	require.NoError(t, err)
	require.Equal(t, 3, qi.Processed, "each task counted once")
	require.Zero(t, qi.Failed)
	require.Zero(t, qi.Active)

	again, err := store.FinishLaunched(ctx, byID["started"], payload("started"), queue.StatusUpdate{Status: model.RunStarted})
	require.NoError(t, err, "the same status again is no conflict")
	require.False(t, again, "a task finished before is no longer held")
}

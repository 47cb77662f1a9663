package asynqwire_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// A launcher takes run tasks in batches and finishes them the way asynq's
// server does one at a time: asynq's Inspector (and so asynqmon) sees the
// same states, attempts, errors and counters, a paused queue gives
// nothing, and a task recovered meanwhile is left alone.
func TestTakeAndFinishRunTasksAsAsynqDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{Shards: 1, TaskMaxRetry: 3, TaskRetention: time.Hour, TaskTimeout: time.Minute})
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{"steps":[]}`)))
	keys := []string{"done", "retry", "archive", "requeue", "gone"}
	for _, k := range keys {
		_, started, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: k})
		require.NoError(t, err)
		require.True(t, started)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	q := queue.ShardQueue(queue.QueueNameDefault, 0) // one shard: every run in its queue

	require.NoError(t, insp.PauseQueue(q))
	none, err := store.Tasks().Take(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, none, "a paused queue gives nothing")
	require.NoError(t, insp.UnpauseQueue(q))

	before := time.Now()
	got, err := store.Tasks().Take(ctx, 4)
	require.NoError(t, err)
	require.Len(t, got, 4)
	rest, err := store.Tasks().Take(ctx, 10)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	tasks := map[string]*asynqwire.Task{}
	for _, tk := range append(got, rest...) {
		require.NoError(t, tk.Err)
		require.Equal(t, queue.TaskTypeRun, tk.Type)
		p, err := queue.DecodeTaskPayload(tk.Payload)
		require.NoError(t, err)
		require.Equal(t, tk.ID, p.IdempotencyKey)
		require.Equal(t, 0, tk.Retried)
		require.Equal(t, 3, tk.MaxRetry)
		require.WithinDuration(t, before.Add(time.Minute), tk.Deadline, 2*time.Second, "the task's timeout bounds the attempt")
		info, err := insp.GetTaskInfo(q, tk.ID)
		require.NoError(t, err)
		require.Equal(t, asynq.TaskStateActive, info.State)
		lease := rdb.ZScore(ctx, "asynq:{s00}chronos}:lease", tk.ID).Val()
		require.InDelta(t, float64(before.Add(asynqwire.LeaseDuration).Unix()), lease, 2)
		tasks[tk.ID] = tk
	}
	empty, err := store.Tasks().Take(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, empty)

	require.NoError(t, rdb.ZAdd(ctx, "asynq:{s00}chronos}:lease", redis.Z{Member: "done", Score: 1}).Err())
	require.NoError(t, rdb.ZRem(ctx, "asynq:{s00}chronos}:lease", "gone").Err())
	require.NoError(t, store.Tasks().ExtendLeases(ctx, []*asynqwire.Task{tasks["done"], tasks["gone"]}))
	require.Greater(t, rdb.ZScore(ctx, "asynq:{s00}chronos}:lease", "done").Val(), float64(before.Unix()))
	require.Zero(t, rdb.ZScore(ctx, "asynq:{s00}chronos}:lease", "gone").Val(), "only held tasks are extended")
	require.NoError(t, rdb.ZAdd(ctx, "asynq:{s00}chronos}:lease", redis.Z{Member: "gone", Score: 1}).Err())

	finish := func(id string, end asynqwire.End, at time.Time, msg string) bool {
		t.Helper()
		mine, err := store.Tasks().Finish(ctx, tasks[id], end, at, msg)
		require.NoError(t, err)
		return mine
	}
	require.True(t, finish("done", asynqwire.Done, time.Time{}, ""))
	info, err := insp.GetTaskInfo(q, "done")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateCompleted, info.State)
	require.WithinDuration(t, time.Now(), info.CompletedAt, 2*time.Second)

	retryAt := time.Now().Add(time.Hour).Truncate(time.Second)
	require.True(t, finish("retry", asynqwire.Retry, retryAt, "executor answered 503"))
	info, err = insp.GetTaskInfo(q, "retry")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateRetry, info.State)
	require.Equal(t, 1, info.Retried)
	require.Equal(t, "executor answered 503", info.LastErr)
	require.Equal(t, retryAt.Unix(), info.NextProcessAt.Unix())
	require.WithinDuration(t, time.Now(), info.LastFailedAt, 2*time.Second)

	require.True(t, finish("archive", asynqwire.Archive, time.Time{}, "workflow not found"))
	info, err = insp.GetTaskInfo(q, "archive")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateArchived, info.State)
	require.Equal(t, "workflow not found", info.LastErr)
	archived, _, err := store.Tasks().Archived(ctx, time.Now().Add(-time.Minute))
	require.NoError(t, err)
	require.Len(t, archived, 1, "the sweep finds it")
	require.Equal(t, "archive", archived[0].ID)
	require.Equal(t, "workflow not found", archived[0].LastErr)

	require.True(t, finish("requeue", asynqwire.Requeue, time.Time{}, ""))
	info, err = insp.GetTaskInfo(q, "requeue")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStatePending, info.State)

	// A task recovered after its lease expired (Recover) is no longer
	// this launcher's to finish.
	require.NoError(t, rdb.LRem(ctx, "asynq:{s00}chronos}:active", 0, "gone").Err())
	require.False(t, finish("gone", asynqwire.Done, time.Time{}, ""))
	require.False(t, finish("done", asynqwire.Done, time.Time{}, ""), "finishing twice changes nothing")

	qi, err := insp.GetQueueInfo(q)
	require.NoError(t, err)
	require.Equal(t, 3, qi.Processed, "done, retry and archive are processed")
	require.Equal(t, 2, qi.Failed, "retry and archive failed")
	require.Equal(t, 3, qi.ProcessedTotal)
	require.Equal(t, 2, qi.FailedTotal)
	require.Zero(t, qi.Active)
	require.Equal(t, int64(1), rdb.ZCard(ctx, "asynq:{s00}chronos}:lease").Val(), "only the recovered task's lease is left")
}

// A task without retention (chronos writes none such, asynq's Client
// may) is deleted when done, as asynq deletes it.
func TestFinishTaskWithoutRetentionDeletesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, nil)
	require.NoError(t, err)
	_, err = asynq.NewClientFromRedisClient(rdb).EnqueueContext(ctx,
		asynq.NewTask(queue.TaskTypeRun, []byte(`{"idempotency_key":"k","workflow_id":"wf","version":"1","source":"manual"}`)),
		asynq.TaskID("k"), asynq.Queue(queue.QueueNameDefault))
	require.NoError(t, err)
	got, err := store.Tasks().Take(ctx, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	mine, err := store.Tasks().Finish(ctx, got[0], asynqwire.Done, time.Time{}, "")
	require.NoError(t, err)
	require.True(t, mine)
	require.Zero(t, rdb.Exists(ctx, "asynq:{chronos}:t:k").Val())
	qi, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(queue.QueueNameDefault)
	require.NoError(t, err)
	require.Equal(t, 1, qi.Processed)
	require.Zero(t, qi.Failed)
}

// `chronos dev` runs on miniredis: the scripts that take and finish run
// tasks work there too, every end of a task included.
func TestTakeAndFinishRunTasksOnMiniredis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := (&queuetest.Redis{Addr: miniredis.RunT(t).Addr()}).Client(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{Shards: 1})
	require.NoError(t, err)
	ends := []asynqwire.End{asynqwire.Done, asynqwire.Retry, asynqwire.Archive, asynqwire.Requeue}
	for _, end := range ends {
		_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: string(end)})
		require.NoError(t, err)
	}
	tasks, err := store.Tasks().Take(ctx, 10)
	require.NoError(t, err)
	require.Len(t, tasks, len(ends))
	for _, tk := range tasks {
		require.NoError(t, tk.Err)
		mine, err := store.Tasks().Finish(ctx, tk, asynqwire.End(tk.ID), time.Now().Add(time.Minute), "failed")
		require.NoError(t, err, tk.ID)
		require.True(t, mine, tk.ID)
	}
	require.Equal(t, "archived", rdb.HGet(ctx, "asynq:{s00}chronos}:t:archive", "state").Val())
	require.Equal(t, []string{"requeue"}, rdb.LRange(ctx, "asynq:{s00}chronos}:pending", 0, -1).Val())
}
